package server

// The web console at /console/ (Options.Console) and the browser checks of
// the API.
//
// The console's assets (package console) are public: they are served
// without authentication, on GET and HEAD only, with headers that keep
// them from being framed or mixed into another site:
//
//	Content-Security-Policy  script, style, image and fetch sources 'self' only, nothing
//	                         inline, no plugins, no <base>, no form posts, frame-ancestors 'none'
//	X-Frame-Options: DENY    the same for browsers without CSP level 2
//	X-Content-Type-Options: nosniff, Referrer-Policy: no-referrer,
//	Cross-Origin-Opener-Policy and -Resource-Policy: same-origin
//
// Everything the console does goes through the signed MNS API. CSRF: an
// API request needs an Authorization header that is an HMAC of the request
// under the user's secret; a page of another site can neither read the
// secret (sessionStorage is per origin) nor make a browser add such a
// header to a cross-site request (it is not a CORS-safelisted header, and
// smqd answers no CORS preflight). With --no-auth the API has no secret to
// lean on, so crossSite refuses, with 403 AccessDenied, every API request
// a browser marks as coming from another origin (Sec-Fetch-Site) or whose
// Origin is not this host. SDKs send neither header and are not affected.
// With authentication on the check is not made: it would cost every
// request two header look-ups (about 700 instructions, measured with
// callgrind) to refuse what the signature check refuses anyway.
//
// features.json tells the console which optional pages to show (topics,
// cluster status): the seam for those APIs. It is built here so that the
// server, which knows what it serves, decides.

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io/fs"
	"mime"
	"net"
	"net/netip"
	"path"
	"strings"

	"github.com/smqd/smqd/server/console"
	"github.com/valyala/fasthttp"
)

// consoleCSP is the console's Content-Security-Policy.
const consoleCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// consoleFeatures are the optional parts of the API this server has, for
// the console's navigation. A part's page appears once its flag is true.
type consoleFeatures struct {
	Topics  bool `json:"topics"`  // the topic API: every server has it (topics.go)
	Cluster bool `json:"cluster"` // GET /cluster: a cluster node (NewCluster)
}

// consoleAsset is one file, ready to serve.
type consoleAsset struct {
	body  []byte
	ctype string
	etag  string
}

// consoleAssets are the console's files by path under /console/.
type consoleAssets struct {
	files map[string]*consoleAsset // read-only after loadConsole
}

func loadConsole(feat consoleFeatures) (*consoleAssets, error) {
	a := &consoleAssets{files: map[string]*consoleAsset{}}
	add := func(name string, body []byte) {
		ctype := mime.TypeByExtension(path.Ext(name))
		switch path.Ext(name) { // not left to the system's MIME table
		case ".js":
			ctype = "text/javascript; charset=utf-8"
		case ".html":
			ctype = "text/html; charset=utf-8"
		case ".css":
			ctype = "text/css; charset=utf-8"
		case ".svg":
			ctype = "image/svg+xml"
		case ".json":
			ctype = "application/json"
		}
		sum := sha256.Sum256(body)
		a.files[name] = &consoleAsset{body: body, ctype: ctype, etag: `"` + base64.RawURLEncoding.EncodeToString(sum[:12]) + `"`}
	}
	files := console.Files()
	err := fs.WalkDir(files, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(files, p)
		if err != nil {
			return err
		}
		add(p, b)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("server: console assets: %w", err)
	}
	if a.files["index.html"] == nil {
		return nil, fmt.Errorf("server: console assets: no index.html")
	}
	fj, _ := json.Marshal(feat)
	add("features.json", fj)
	return a, nil
}

// serveConsole answers GET or HEAD of /console and /console/<file>.
func (s *Server) serveConsole(ctx *fasthttp.RequestCtx, p []byte) {
	h := &ctx.Response.Header
	h.Set("Content-Security-Policy", consoleCSP)
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	h.Set("Cache-Control", "no-cache")
	if string(p) == "/console" {
		h.Set("Location", "/console/")
		ctx.Response.SetStatusCode(fasthttp.StatusMovedPermanently)
		return
	}
	if !assetFetchAllowed(&ctx.Request.Header) {
		h.SetContentType("text/plain; charset=utf-8")
		ctx.Response.SetStatusCode(fasthttp.StatusForbidden)
		ctx.Response.SetBodyString("the console's files are not served to other sites")
		return
	}
	name := string(bytes.TrimPrefix(p, []byte("/console/")))
	if name == "" {
		name = "index.html"
	}
	a := s.console.files[name]
	if a == nil {
		h.SetContentType("text/plain; charset=utf-8")
		ctx.Response.SetStatusCode(fasthttp.StatusNotFound)
		ctx.Response.SetBodyString("not found")
		return
	}
	h.Set("ETag", a.etag)
	if string(ctx.Request.Header.Peek("If-None-Match")) == a.etag {
		ctx.Response.SetStatusCode(fasthttp.StatusNotModified)
		return
	}
	h.SetContentType(a.ctype)
	ctx.Response.SetStatusCode(fasthttp.StatusOK)
	ctx.Response.SetBodyRaw(a.body)
}

// assetFetchAllowed is a resource isolation policy for the console's
// files: another site may link to the console (a top-level navigation),
// but not load its scripts or pages into its own (Sec-Fetch-Site is sent
// by current browsers; requests without it are allowed).
func assetFetchAllowed(h *fasthttp.RequestHeader) bool {
	site := h.Peek("Sec-Fetch-Site")
	switch string(site) {
	case "", "same-origin", "none":
		return true
	}
	return string(h.Peek("Sec-Fetch-Mode")) == "navigate" && string(h.Peek("Sec-Fetch-Dest")) == "document"
}

// crossSite reports whether a browser marked the request as coming from
// another origin: Sec-Fetch-Site other than same-origin or none (a user
// typing the address), or, from browsers that do not send it, an Origin
// header whose host is not the request's Host. Requests with neither
// header (every SDK, curl) are not cross-site.
//
// A request whose Host is a name other than localhost is refused too,
// browser headers or not: a page of another site whose name was rebound to
// this server's address (DNS rebinding) is "same-origin" to the browser,
// with that name as Host, and over plain HTTP to a name (not a
// potentially trustworthy origin) the browser sends no Sec-Fetch-Site, nor
// an Origin on a GET: its receives, peeks, listings and GET /backup looked
// like an SDK's (tour2 audit, 2026-12-07). So a --no-auth smqd is used at
// an IP address or at localhost, by SDKs too.
func crossSite(h *fasthttp.RequestHeader) bool {
	if host := h.Host(); len(host) > 0 && !addressHost(host) {
		return true
	}
	site, origin := h.Peek("Sec-Fetch-Site"), h.Peek("Origin")
	if len(site) == 0 && len(origin) == 0 {
		return false // no browser's request
	}
	if len(site) > 0 {
		return string(site) != "same-origin" && string(site) != "none"
	}
	_, host, ok := bytes.Cut(origin, []byte("://"))
	if !ok {
		return true // "null" (sandboxed frames, file: pages) and other oddities
	}
	return !sameHost(host, origin[:len(origin)-len(host)-3], h.Host())
}

// addressHost reports whether a Host header names an IP address or
// localhost (a name no one else can point at this server).
func addressHost(host []byte) bool {
	name := string(host)
	if h, _, err := net.SplitHostPort(name); err == nil {
		name = h
	}
	name = strings.TrimSuffix(strings.TrimPrefix(name, "["), "]")
	if _, err := netip.ParseAddr(name); err == nil {
		return true
	}
	name = strings.ToLower(strings.TrimSuffix(name, "."))
	return name == "localhost" || strings.HasSuffix(name, ".localhost")
}

// sameHost compares an Origin's host[:port] with a Host header, with the
// scheme's default port made explicit on both sides.
func sameHost(originHost, scheme, host []byte) bool {
	def := ":80"
	if string(scheme) == "https" {
		def = ":443"
	}
	withPort := func(b []byte) string {
		if i := bytes.LastIndexByte(b, ':'); i < 0 || bytes.IndexByte(b[i:], ']') >= 0 {
			return string(b) + def
		}
		return string(b)
	}
	return len(host) > 0 && withPort(originHost) == withPort(host)
}
