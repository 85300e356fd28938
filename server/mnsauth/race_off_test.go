//go:build !race

package mnsauth

const raceEnabled = false
