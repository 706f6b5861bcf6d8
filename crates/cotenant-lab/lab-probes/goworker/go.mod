module cotenant/goworker

go 1.25

require github.com/cotenant/cotenant/go v0.0.0

// The lab writes the go/ module of this repository (embedded in the cotenant binary: its
// go.mod and the package folders cotenant/ and cotenant/autostart/) next to this file, and
// main.go imports github.com/cotenant/cotenant/go/cotenant: no network, no module cache.
replace github.com/cotenant/cotenant/go => ./cotenant-go
