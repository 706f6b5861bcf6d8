module cotenant/goworker

go 1.21
