//go:build long

package chaos

// chaosLong selects the long fault runs (-tags long: make test-long).
const chaosLong = true
