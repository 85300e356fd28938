// Package console holds the web console's assets: plain ES modules, a
// style sheet and an HTML page, embedded in the binary (no CDN, no build
// step, no network at run time). Package server serves them at /console/
// (server/console.go); docs/console.md describes the console.
//
// The console is a client of the signed MNS API like any SDK: it computes
// each request's signature in the browser (WebCrypto HMAC-SHA1) with the
// access key its user signed in with, kept in sessionStorage. The assets
// hold no secret and need no authentication.
package console

import (
	"embed"
	"io/fs"
)

//go:embed static
var static embed.FS

// Files returns the console's files, rooted at its static directory
// ("index.html", "app.js", ...).
func Files() fs.FS {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic("console: embedded static directory missing: " + err.Error()) // a broken build
	}
	return sub
}
