//go:build race

package main

// raceEnabled: the test binary runs with the race detector, and so does the
// daemon that sdk_test.go builds.
const raceEnabled = true
