// Package server is the HTTP facade of smqd: the Alibaba Cloud Simple
// Message Queue (formerly MNS) queue API, version 2015-06-06, on fasthttp,
// byte-compatible with the real SDKs (shared spec: mns-queue-api.md).
//
// Shape:
//
//	srv, err := server.New(broker, server.Options{Credentials: map[string]string{id: secret}})
//	go srv.Serve(ln)              // returns nil after Shutdown
//	...
//	srv.Shutdown(ctx)             // stop accepting, answer long polls, drain
//	broker.Close()                // the caller owns the broker
//
// One handler serves everything on the listener given to Serve:
//
//	/queues, /queues/{q}, /queues/{q}/messages   the 14 queue operations, signed
//	GET /healthz                                 200 "ok" (503 while shutting down), not signed
//	GET /metrics                                 Prometheus text format, not signed
//	                                             (only on ServeMetrics's listener
//	                                             with Options.SeparateMetrics)
//	GET /console/...                             the web console's files (Options.Console),
//	                                             not signed; the console signs its API calls
//
// Request flow (server.go): route on method and the raw request target
// (absolute form stripped, route.go) → authenticate on the headers and
// check the declared body size, before any body byte is read (auth.go,
// body.go) → read the body within the cap, check Content-MD5 → parse the
// query (query.go) and the body (xmlparse.go, requests.go) and validate
// every value → call the engine → encode the answer (xmlwrite.go). Errors
// of every layer go through the one table in errors.go. Connections are
// capped by Options.MaxConns (conns.go); Options.TLS serves HTTPS.
//
// Files:
//
//	server.go            Server, New, Serve, Shutdown; the handler, recover, request ids
//	options.go           Options and their defaults
//	route.go             method + path → operation; the pooled per-request state
//	query.go             request target splitting; query parameters (%XX only, '+' kept)
//	auth.go              signature v2 policy: header checks and their error codes
//	body.go              bodies: checked headers first, read within the cap, drained when refused
//	conns.go             the connection cap
//	mnsauth/             the canonical string, HMAC signing and verification,
//	                     shared with the signing clients (smqbench, smqctl)
//	xmlparse.go          the request XML parser (local names, entities, CR LF)
//	xmlwrite.go          the append-style response encoder
//	requests.go          request documents → engine arguments, with range checks
//	handlers_queue.go    Create/Set/Get/Delete/ListQueue
//	handlers_message.go  send, receive, peek, delete, change visibility
//	errors.go            the error table
//	metrics.go           /metrics (client_golang registry, request metrics) and /healthz
//	metrics_broker.go    the collector of queue and storage metrics; per-queue series limits
//	console.go           /console/ (assets of console/, security headers), cross-site refusal
//	console/             the console's embedded files (ES modules, CSS, HTML)
//
// Concurrency: the handler runs on fasthttp's per-connection goroutines and
// holds no lock of its own across engine calls; per-request scratch comes
// from a sync.Pool and never outlives the request (no *fasthttp.RequestCtx
// and none of its byte slices are kept). Long polls block inside
// engine.Queue.Receive on the Server's base context, which Shutdown cancels.
package server
