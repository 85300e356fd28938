//go:build !long

package engine

// modelLong selects the long model run (-tags long).
const modelLong = false
