//go:build !race

package index

// raceEnabled is true when the tests run with -race.
const raceEnabled = false
