package engine

// HTTP endpoints of subscriptions, parsed for pushing (push.go): where a
// push goes, what its signature covers, and which endpoint's concurrency
// it counts against (push.go invariant 3).

import (
	"errors"
	"net"
	"net/url"
	"strings"
)

// pushURL is an HTTP endpoint, parsed.
type pushURL struct {
	url      string // what the request goes to
	resource string // path and query, signed (spec §3.6)
	key      string // scheme://host:port: the endpoint of invariant 3
	host     string // host name or address, lower case
}

func parsePushURL(ep string) (*pushURL, error) {
	u, err := url.Parse(ep)
	if err != nil {
		return nil, errors.New("is not a valid URL")
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" || u.Host == "" || u.Hostname() == "" {
		return nil, errors.New("an HTTP endpoint is http://host[:port][/path] or https://host[:port][/path]")
	}
	if u.User != nil {
		return nil, errors.New("an HTTP endpoint must not carry a user name or password")
	}
	if u.Opaque != "" {
		return nil, errors.New("an HTTP endpoint needs // after the scheme")
	}
	res := u.EscapedPath()
	if res == "" || res == "/" {
		res = "/notifications" // spec §3.5
	}
	if u.RawQuery != "" {
		// url.Parse keeps a query's bytes as given: a space or a control
		// byte made every push a malformed request line (topics audit).
		// They are percent-encoded, with bytes that are not ASCII, and the
		// push is signed over what is sent. Never refused: subscriptions
		// stored by earlier versions are parsed here at every start.
		res += "?" + escapeQuery(u.RawQuery)
	}
	port := u.Port()
	if port == "" {
		port = "80"
		if scheme == "https" {
			port = "443"
		}
	}
	host := strings.ToLower(u.Hostname())
	return &pushURL{
		url:      scheme + "://" + u.Host + res,
		resource: res,
		key:      scheme + "://" + net.JoinHostPort(host, port),
		host:     host,
	}, nil
}

// escapeQuery percent-encodes the bytes of a raw query that a request
// line cannot carry: controls, space and DEL. Bytes that are not ASCII are
// sent as given, as before (a receiver reads them, and the signature of
// such an existing subscription's pushes stays the same: review).
func escapeQuery(q string) string {
	const hex = "0123456789ABCDEF"
	var b []byte
	for i := 0; i < len(q); i++ {
		c := q[i]
		if c > ' ' && c != 0x7f {
			if b != nil {
				b = append(b, c)
			}
			continue
		}
		if b == nil {
			b = append(make([]byte, 0, len(q)+8), q[:i]...)
		}
		b = append(b, '%', hex[c>>4], hex[c&15])
	}
	if b == nil {
		return q
	}
	return string(b)
}
