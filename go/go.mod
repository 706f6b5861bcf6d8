module github.com/cotenant/cotenant/go

go 1.25
