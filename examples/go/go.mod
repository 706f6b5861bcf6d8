module example.com/cotenant-go-service

go 1.25

require github.com/cotenant/cotenant/go v0.0.0

replace github.com/cotenant/cotenant/go => ../../go
