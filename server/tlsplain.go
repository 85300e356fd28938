package server

// A plain HTTP request sent to the HTTPS listener (an endpoint written
// http:// by mistake) is answered 400 with an MNS error that says so,
// as net/http does for its servers, instead of a closed connection that
// clients report as "EOF", "Empty reply from server" or "socket hang up".
//
// The handshake runs at the connection's first Read (fasthttp's serving
// goroutine: one reader, so the flag needs no lock); crypto/tls hands
// back the raw connection in a RecordHeaderError when the first bytes
// are no TLS record, and only a header that reads as an HTTP method gets
// the answer. Anything else fails as before.

import (
	"crypto/tls"
	"errors"
	"net"
	"strconv"
	"time"

	"github.com/smqd/smqd/engine/cluster"
)

// tlsListener is tls.NewListener with the answer above.
type tlsListener struct {
	net.Listener
	cfg *tls.Config
	s   *Server
}

func (l *tlsListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	// A client may send only so much before its handshake is done
	// (cluster.MaxTLSHandshakeBytes): an unfinished ClientHello of 64 KiB
	// held 115 KiB a connection (TLS audit).
	hb := cluster.NewHandshakeBudget(c)
	return &httpsConn{Conn: tls.Server(hb, l.cfg), s: l.s, hb: hb}, nil
}

// httpsConn is a server-side *tls.Conn (embedded: fasthttp finds its
// ConnectionState) whose first Read runs the handshake itself.
type httpsConn struct {
	*tls.Conn
	s      *Server
	hb     *cluster.HandshakeBudget
	shaken bool
}

func (c *httpsConn) Read(b []byte) (int, error) {
	if !c.shaken {
		c.shaken = true
		err := c.Conn.Handshake()
		c.hb.Done()
		if err != nil {
			var re tls.RecordHeaderError
			if errors.As(err, &re) && re.Conn != nil && looksLikeHTTP(re.RecordHeader[:]) {
				c.s.answerPlainHTTP(re.Conn)
			}
			return 0, err
		}
	}
	return c.Conn.Read(b)
}

// looksLikeHTTP reports whether the first five bytes of a connection
// start an HTTP/1 request line.
func looksLikeHTTP(h []byte) bool {
	for _, m := range []string{"GET /", "HEAD ", "POST ", "PUT /", "DELET", "OPTIO", "PATCH"} {
		if string(h) == m {
			return true
		}
	}
	return false
}

// answerPlainHTTP writes the 400 on the raw connection (the handshake has
// failed; crypto/tls closes nothing itself) and counts it as an error.
func (s *Server) answerPlainHTTP(c net.Conn) {
	s.metrics.countError(codeInvalidRequestURL)
	now := time.Now()
	body := appendRootOpen(nil, "Error")
	body = appendElem(body, "Code", codeInvalidRequestURL.String())
	body = appendElem(body, "Message", "this port speaks HTTPS: write the endpoint with https://")
	body = appendElem(body, "RequestId", s.appendRequestID(nil, now))
	body = appendClose(body, "Error")
	out := make([]byte, 0, 256+len(body))
	out = append(out, "HTTP/1.1 400 Bad Request\r\nContent-Type: text/xml;charset=utf-8\r\nConnection: close\r\nContent-Length: "...)
	out = strconv.AppendInt(out, int64(len(body)), 10)
	out = append(out, "\r\n\r\n"...)
	out = append(out, body...)
	c.SetWriteDeadline(now.Add(time.Second))
	c.Write(out)
}
