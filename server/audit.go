package server

// The audit log: one line for each control-plane operation a node runs
// (queues, topics and subscriptions created, changed or deleted, backups,
// membership changes), with who asked, from where, and how it ended, so
// that "who deleted this queue?" has an answer. Message operations and
// reads are not logged: they are the data plane, counted in the metrics.
// A forwarded request is logged once, by the shard's leader that runs it;
// requests refused by policy are logged by authz.go.

import (
	"bytes"
	"log/slog"

	"github.com/valyala/fasthttp"
)

// audited reports whether o is logged by the audit log.
func audited(o op) bool {
	switch o {
	case opCreateQueue, opSetQueueAttributes, opDeleteQueue,
		opCreateTopic, opSetTopicAttributes, opDeleteTopic,
		opSubscribe, opSetSubscriptionAttributes, opUnsubscribe,
		opBackup, opCancelBackup, opClusterAddNode, opClusterRemoveNode, opPurgeQueue:
		return true
	}
	return false
}

// audit logs st's operation, which ran here, once it is answered.
func (s *Server) audit(ctx *fasthttp.RequestCtx, st *reqState) {
	if !st.ran || !audited(st.op) {
		return
	}
	status := ctx.Response.StatusCode()
	attrs := make([]slog.Attr, 0, 9)
	attrs = append(attrs,
		slog.String("op", st.op.String()),
		slog.String("resource", auditResource(st)),
		slog.Int("status", status),
		slog.String("access_key_id", string(st.auth.id)),
		slog.String("request_id", string(st.reqID)))
	if st.fw != nil {
		attrs = append(attrs, slog.String("client", string(ctx.Request.Header.Peek(hdrClientIP))), slog.Uint64("via_node", st.fw.node))
	} else if len(s.opts.TrustedProxies) > 0 {
		attrs = append(attrs, slog.String("client", s.clientAddr(ctx).String()), slog.String("peer", tcpPeer(ctx.Conn()).String()))
	} else {
		attrs = append(attrs, slog.String("client", ctx.RemoteAddr().String()))
	}
	if status >= 300 {
		attrs = append(attrs, slog.String("error", errorCodeOf(ctx)))
	}
	s.log.LogAttrs(s.base, slog.LevelInfo, "audit", attrs...)
}

// auditResource names what st's operation acted on, as a policy's
// resource path does.
func auditResource(st *reqState) string {
	switch st.op {
	case opBackup:
		return "/backup"
	case opClusterAddNode, opClusterRemoveNode:
		return "/cluster/nodes/" + string(st.name)
	}
	return string(appendResource(nil, st.op, st.name, st.sub))
}

// errorCodeOf returns the Code of an error answer's document.
func errorCodeOf(ctx *fasthttp.RequestCtx) string {
	b := ctx.Response.Body()
	const open, end = "<Code>", "</Code>"
	i := bytes.Index(b, []byte(open))
	if i < 0 {
		return ""
	}
	b = b[i+len(open):]
	j := bytes.Index(b, []byte(end))
	if j < 0 {
		return ""
	}
	return string(b[:j])
}
