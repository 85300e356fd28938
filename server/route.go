package server

// Routing on method and raw path (spec §1.2). The path is the raw request
// target with any absolute-form prefix stripped; it is never normalised
// beyond collapsing leading slashes (so "//queues/q", sent by @alicloud/mns
// with a trailing slash in its endpoint, is routed and then fails its
// signature, spec §1.2) and ignoring one trailing slash. Unknown paths and
// methods are InvalidRequestURL, never a redirect.
//
// Some operations share a route and are told apart later: PUT /queues/{q}
// is Create or (metaoverride=true) Set; POST .../messages is a single or a
// batch send by its root element; GET .../messages is receive or peek,
// single or batch, by query; DELETE .../messages is single (ReceiptHandle
// in the query), batch (body), or (purge=true) smqd's PurgeQueue.

import (
	"bytes"
	"net/netip"
	"time"

	"github.com/smqd/smqd/engine"
)

// op is an operation, for routing and metrics.
type op uint8

const (
	opUnknown op = iota
	opCreateQueue
	opSetQueueAttributes
	opGetQueueAttributes
	opDeleteQueue
	opListQueue
	opSendMessage
	opBatchSendMessage
	opReceiveMessage
	opBatchReceiveMessage
	opPeekMessage
	opBatchPeekMessage
	opDeleteMessage
	opBatchDeleteMessage
	opChangeMessageVisibility
	opHealthz
	opMetrics
	opConsole
	opCluster
	opClusterAddNode
	opClusterRemoveNode
	opCreateTopic
	opSetTopicAttributes
	opGetTopicAttributes
	opDeleteTopic
	opListTopic
	opSubscribe
	opSetSubscriptionAttributes
	opGetSubscriptionAttributes
	opUnsubscribe
	opListSubscriptionByTopic
	opPublishMessage
	opPushCert // GET the push signing certificate (pushcert.go), not signed
	opBackup   // GET /backup, signed (backup.go)
	// DELETE /queues/{q}/messages?purge=true, signed: every message of the
	// queue deleted (smqd's own, handlers_message.go purgeQueue)
	opPurgeQueue
	opCancelBackup // DELETE /backup, signed: ends the backup running on this node (backup.go)
	numOps
)

var opNames = [numOps]string{
	opUnknown:                   "Unknown",
	opCreateQueue:               "CreateQueue",
	opSetQueueAttributes:        "SetQueueAttributes",
	opGetQueueAttributes:        "GetQueueAttributes",
	opDeleteQueue:               "DeleteQueue",
	opListQueue:                 "ListQueue",
	opSendMessage:               "SendMessage",
	opBatchSendMessage:          "BatchSendMessage",
	opReceiveMessage:            "ReceiveMessage",
	opBatchReceiveMessage:       "BatchReceiveMessage",
	opPeekMessage:               "PeekMessage",
	opBatchPeekMessage:          "BatchPeekMessage",
	opDeleteMessage:             "DeleteMessage",
	opBatchDeleteMessage:        "BatchDeleteMessage",
	opChangeMessageVisibility:   "ChangeMessageVisibility",
	opHealthz:                   "Healthz",
	opMetrics:                   "Metrics",
	opConsole:                   "Console",
	opCluster:                   "ClusterStatus",
	opClusterAddNode:            "ClusterAddNode",
	opClusterRemoveNode:         "ClusterRemoveNode",
	opCreateTopic:               "CreateTopic",
	opSetTopicAttributes:        "SetTopicAttributes",
	opGetTopicAttributes:        "GetTopicAttributes",
	opDeleteTopic:               "DeleteTopic",
	opListTopic:                 "ListTopic",
	opSubscribe:                 "Subscribe",
	opSetSubscriptionAttributes: "SetSubscriptionAttributes",
	opGetSubscriptionAttributes: "GetSubscriptionAttributes",
	opUnsubscribe:               "Unsubscribe",
	opListSubscriptionByTopic:   "ListSubscriptionByTopic",
	opPublishMessage:            "PublishMessage",
	opPushCert:                  "PushCertificate",
	opBackup:                    "Backup",
	opPurgeQueue:                "PurgeQueue",
	opCancelBackup:              "CancelBackup",
}

func (o op) String() string { return opNames[o] }

func (o op) isReceive() bool { return o == opReceiveMessage || o == opBatchReceiveMessage }

// changesNothing reports whether o only reads: run again after its
// forward got no answer, it has the same effect as run once (nothing).
func (o op) changesNothing() bool {
	switch o {
	case opGetQueueAttributes, opPeekMessage, opBatchPeekMessage,
		opGetTopicAttributes, opGetSubscriptionAttributes, opListSubscriptionByTopic:
		return true
	}
	return false
}

// isTopic reports whether o is a topic operation (topics.go).
func (o op) isTopic() bool { return o >= opCreateTopic && o <= opPublishMessage }

// routed is the outcome of routing: the operation (or its family, see the
// file comment) and the raw queue (or topic) name segment, and for
// subscription operations the raw subscription name segment.
type routed struct {
	op    op
	queue []byte
	sub   []byte
}

// route maps method and raw path to an operation.
func route(method, path []byte) routed {
	for len(path) > 1 && path[0] == '/' && path[1] == '/' {
		path = path[1:]
	}
	if len(path) > 1 && path[len(path)-1] == '/' {
		path = path[:len(path)-1]
	}
	m := string(method) // compared only; the conversion does not allocate
	switch string(path) {
	case "/healthz":
		if m == "GET" || m == "HEAD" {
			return routed{op: opHealthz}
		}
		return routed{}
	case "/metrics":
		if m == "GET" || m == "HEAD" {
			return routed{op: opMetrics}
		}
		return routed{}
	case "/queues":
		if m == "GET" {
			return routed{op: opListQueue}
		}
		return routed{}
	case "/topics":
		if m == "GET" {
			return routed{op: opListTopic}
		}
		return routed{}
	case "/console":
		if m == "GET" || m == "HEAD" {
			return routed{op: opConsole}
		}
		return routed{}
	case "/cluster":
		if m == "GET" || m == "HEAD" {
			return routed{op: opCluster}
		}
		return routed{}
	case "/backup":
		switch m {
		case "GET":
			return routed{op: opBackup}
		case "DELETE":
			return routed{op: opCancelBackup}
		}
		return routed{}
	}
	if id, ok := bytes.CutPrefix(path, []byte("/cluster/nodes/")); ok && len(id) > 0 && bytes.IndexByte(id, '/') < 0 {
		switch m {
		case "PUT":
			return routed{op: opClusterAddNode, queue: id}
		case "DELETE":
			return routed{op: opClusterRemoveNode, queue: id}
		}
		return routed{}
	}
	if isPushCertPath(path) {
		if m == "GET" || m == "HEAD" {
			return routed{op: opPushCert}
		}
		return routed{}
	}
	if bytes.HasPrefix(path, []byte("/console/")) {
		if m == "GET" || m == "HEAD" {
			return routed{op: opConsole}
		}
		return routed{}
	}
	if bytes.HasPrefix(path, []byte("/topics/")) {
		return routeTopic(m, path[len("/topics/"):])
	}
	if !bytes.HasPrefix(path, []byte("/queues/")) {
		return routed{}
	}
	rest := path[len("/queues/"):]
	name, tail := rest, []byte(nil)
	if i := bytes.IndexByte(rest, '/'); i >= 0 {
		name, tail = rest[:i], rest[i:]
	}
	if len(name) == 0 {
		return routed{}
	}
	switch string(tail) {
	case "":
		switch m {
		case "PUT":
			return routed{op: opCreateQueue, queue: name}
		case "GET":
			return routed{op: opGetQueueAttributes, queue: name}
		case "DELETE":
			return routed{op: opDeleteQueue, queue: name}
		}
	case "/messages":
		switch m {
		case "POST":
			return routed{op: opSendMessage, queue: name}
		case "GET":
			return routed{op: opReceiveMessage, queue: name}
		case "DELETE":
			return routed{op: opDeleteMessage, queue: name}
		case "PUT":
			return routed{op: opChangeMessageVisibility, queue: name}
		}
	}
	return routed{}
}

// routeTopic routes the paths under /topics/ (topic spec §1.1, §2.1). PUT
// is Create or Subscribe here; metaoverride=true makes it the Set (§1.2).
func routeTopic(m string, rest []byte) routed {
	name, tail := rest, []byte(nil)
	if i := bytes.IndexByte(rest, '/'); i >= 0 {
		name, tail = rest[:i], rest[i:]
	}
	if len(name) == 0 {
		return routed{}
	}
	switch string(tail) {
	case "":
		switch m {
		case "PUT":
			return routed{op: opCreateTopic, queue: name}
		case "GET":
			return routed{op: opGetTopicAttributes, queue: name}
		case "DELETE":
			return routed{op: opDeleteTopic, queue: name}
		}
		return routed{}
	case "/messages":
		if m == "POST" {
			return routed{op: opPublishMessage, queue: name}
		}
		return routed{}
	case "/subscriptions":
		if m == "GET" {
			return routed{op: opListSubscriptionByTopic, queue: name}
		}
		return routed{}
	}
	sub, ok := bytes.CutPrefix(tail, []byte("/subscriptions/"))
	if !ok || len(sub) == 0 || bytes.IndexByte(sub, '/') >= 0 {
		return routed{}
	}
	switch m {
	case "PUT":
		return routed{op: opSubscribe, queue: name, sub: sub}
	case "GET":
		return routed{op: opGetSubscriptionAttributes, queue: name, sub: sub}
	case "DELETE":
		return routed{op: opUnsubscribe, queue: name, sub: sub}
	}
	return routed{}
}

// reqState is the per-request scratch space, pooled by the Server. Nothing
// in it outlives the request; byte slices from fasthttp are referenced only
// while the handler runs.
type reqState struct {
	op      op
	b       *engine.Broker // the broker of the request's queue
	fw      *forwardedFrom // set when another node forwarded the request
	cctx    clientCtx      // a receive's context: ends when the client hangs up (clientwatch.go)
	tls     bool           // the client's connection is TLS (its own or, forwarded, the first node's)
	src     netip.Addr     // the client's address, found only for policies that ask (authz.go); zero: not known
	reqID   []byte
	name    []byte // decoded queue (or topic) name
	sub     []byte // decoded subscription name
	query   queryParams
	qbuf    []byte
	auth    authScratch
	body    []byte // the request body: bodyBuf, or fasthttp's buffer (see readBody)
	bodyBuf []byte // owned buffer the body is read into
	doc     xmlDoc
	out     []byte // response body being encoded (fasthttp's buffer, see respBody)
	scratch []byte
	res     []byte // the resource path a policy is checked against (authz.go)
	entries []engine.SendEntry
	props   []engine.Property // the send's properties (decodeSend); entries point into it
	results []engine.SendResult
	msgs    []engine.Message
	handles []engine.ReceiptHandle
	hidx    []int // index in the request of handles[i]
	herrs   []error
	derrs   []error // per request entry
	// A long poll run again on a shard's next leader after it waited on
	// the old one (engine.RetryWaitError): what remains of its wait.
	waitLeft   time.Duration
	waitCapped bool
	rerouted   bool // counted in Server.rerouted (cluster.go)
	ran        bool // the operation ran here (dispatched, or a backup or membership change): audit.go
}

// release drops references to request memory before the state is pooled.
func (st *reqState) release() {
	st.cctx.finish()
	st.b, st.fw = nil, nil
	st.waitLeft, st.waitCapped, st.rerouted, st.ran = 0, false, false, false
	st.query = queryParams{}
	st.auth.id = nil
	st.src = netip.Addr{}
	clear(st.auth.headers[:cap(st.auth.headers)])
	st.auth.headers = st.auth.headers[:0]
	st.doc.reset()
	for i := range st.entries {
		st.entries[i] = engine.SendEntry{}
	}
	st.entries = st.entries[:0]
	clear(st.props)
	st.props = st.props[:0]
	for i := range st.results {
		st.results[i] = engine.SendResult{}
	}
	st.results = st.results[:0]
	for i := range st.herrs {
		st.herrs[i] = nil
	}
	for i := range st.derrs {
		st.derrs[i] = nil
	}
	st.derrs = st.derrs[:0]
	// msgs keep their Body buffers for reuse by the engine.
	const maxKeep = 1 << 20
	st.out = nil
	st.body = nil
	if cap(st.bodyBuf) > maxKeep {
		st.bodyBuf = nil
	}
	if cap(st.doc.text) > maxKeep {
		st.doc.text = nil
	}
	if cap(st.doc.nodes) > 4096 {
		st.doc.nodes = nil
	}
}
