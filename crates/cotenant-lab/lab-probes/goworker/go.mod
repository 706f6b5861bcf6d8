module cotenant/goworker

go 1.25

require github.com/cotenant/cotenant/go v0.0.0

// The lab writes the go/ package of this repository (embedded in the cotenant binary) next to
// this file: no network, no module cache.
replace github.com/cotenant/cotenant/go => ./cotenant-go
