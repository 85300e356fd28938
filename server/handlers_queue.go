package server

// Queue operations: CreateQueue, SetQueueAttributes, GetQueueAttributes,
// DeleteQueue, ListQueue (spec §1.2, §3.2-§3.4, §4).

import (
	"bytes"

	"github.com/smqd/smqd/engine"
	"github.com/valyala/fasthttp"
)

// appendQueueURL appends http(s)://<host>/queues/<name>, https when the
// client's request came over TLS.
func appendQueueURL(b []byte, ctx *fasthttp.RequestCtx, st *reqState, name string) []byte {
	if st.tls {
		b = append(b, "https://"...)
	} else {
		b = append(b, "http://"...)
	}
	b = append(b, ctx.Request.Header.Host()...)
	b = append(b, "/queues/"...)
	return append(b, name...)
}

func (s *Server) createQueue(ctx *fasthttp.RequestCtx, st *reqState) error {
	p, err := decodeQueueAttrs(&st.doc, st.body)
	if err != nil {
		return err
	}
	if err := s.authorizeDeadLetter(st, &p); err != nil {
		return err
	}
	cfg := p.Apply(engine.DefaultQueueConfig())
	if err := cfg.Validate(); err != nil {
		return err
	}
	name := string(st.name)
	if p.DeadLetterQueue == nil && p.MaxReceiveCount == nil {
		// No SDK sends a dead-letter policy: a create that names none is
		// the same as one that names the queue's own (an application's
		// CreateQueue at each start answered 409 once an operator set a
		// policy; dead-letter audit, 2026-12-07).
		if info, err := st.b.GetQueueAttributes(name); err == nil {
			cfg.DeadLetterQueue, cfg.MaxReceiveCount = info.Config.DeadLetterQueue, info.Config.MaxReceiveCount
		}
	}
	created, err := st.b.CreateQueue(name, cfg)
	if err != nil {
		return err
	}
	st.scratch = appendQueueURL(st.scratch[:0], ctx, st, name)
	ctx.Response.Header.SetBytesV("Location", st.scratch)
	if created {
		ctx.Response.SetStatusCode(fasthttp.StatusCreated)
	} else {
		ctx.Response.SetStatusCode(fasthttp.StatusNoContent)
	}
	return nil
}

func (s *Server) setQueueAttributes(ctx *fasthttp.RequestCtx, st *reqState) error {
	p, err := decodeQueueAttrs(&st.doc, st.body)
	if err != nil {
		return err
	}
	if err := s.authorizeDeadLetter(st, &p); err != nil {
		return err
	}
	if err := st.b.SetQueueAttributes(string(st.name), p); err != nil {
		return err
	}
	ctx.Response.SetStatusCode(fasthttp.StatusNoContent)
	return nil
}

// appendQueueAttrs appends the 12 elements of spec §3.3, in its order, and
// after them, only for a queue with a dead-letter policy, the flat
// extension elements DeadLetterTargetQueue and MaxReceiveCount (topic spec
// §3.8: flat, so that Python's decoder copes).
func appendQueueAttrs(b []byte, info *engine.QueueInfo) []byte {
	b = appendElem(b, "QueueName", info.Name)
	b = appendIntElem(b, "CreateTime", unixSeconds(info.CreateTime))
	b = appendIntElem(b, "LastModifyTime", unixSeconds(info.LastModifyTime))
	b = appendIntElem(b, "DelaySeconds", int64(info.Config.Delay.Seconds()))
	b = appendIntElem(b, "MaximumMessageSize", int64(info.Config.MaxMessageBytes))
	b = appendIntElem(b, "MessageRetentionPeriod", int64(info.Config.Retention.Seconds()))
	b = appendIntElem(b, "VisibilityTimeout", int64(info.Config.VisibilityTimeout.Seconds()))
	b = appendIntElem(b, "PollingWaitSeconds", int64(info.Config.PollingWait.Seconds()))
	b = appendIntElem(b, "ActiveMessages", info.Active)
	b = appendIntElem(b, "InactiveMessages", info.Inactive)
	b = appendIntElem(b, "DelayMessages", info.Delayed)
	b = appendBoolElem(b, "LoggingEnabled", info.Config.LoggingEnabled)
	if info.Config.DeadLetterQueue != "" {
		b = appendElem(b, "DeadLetterTargetQueue", info.Config.DeadLetterQueue)
		b = appendIntElem(b, "MaxReceiveCount", int64(info.Config.MaxReceiveCount))
	}
	return b
}

func (s *Server) getQueueAttributes(ctx *fasthttp.RequestCtx, st *reqState) error {
	info, err := st.b.GetQueueAttributes(string(st.name))
	if err != nil {
		return s.retryClosedRead(err)
	}
	b := appendRootOpen(respBody(ctx), "Queue")
	b = appendQueueAttrs(b, &info)
	st.out = appendClose(b, "Queue")
	s.writeBody(ctx, st, fasthttp.StatusOK)
	return nil
}

func (s *Server) deleteQueue(ctx *fasthttp.RequestCtx, st *reqState) error {
	err := st.b.DeleteQueue(string(st.name))
	s.queues.drop(st.name, nil)
	if err != nil {
		return err
	}
	ctx.Response.SetStatusCode(fasthttp.StatusNoContent)
	return nil
}

// listQueues serves ListQueue with the x-mns-prefix, x-mns-marker,
// x-mns-ret-number and x-mns-with-meta headers (spec §2.5, §3.4). The
// marker is the name of the first queue of the page (names are
// [A-Za-z0-9-], so they need no encoding).
func (s *Server) listQueues(ctx *fasthttp.RequestCtx, st *reqState) error {
	h := &ctx.Request.Header
	limit := 1000
	if v := h.Peek("X-Mns-Ret-Number"); len(v) > 0 {
		n, err := intInRange("x-mns-ret-number", v, 1, 1000, "")
		if err != nil {
			return err
		}
		limit = int(n)
	}
	withMeta := false
	if v := h.Peek("X-Mns-With-Meta"); len(v) > 0 {
		withMeta = isTrue(v)
	}
	prefix := string(bytes.TrimSpace(h.Peek("X-Mns-Prefix")))
	marker := string(bytes.TrimSpace(h.Peek("X-Mns-Marker")))
	if err := s.clusterReadBarrier(); err != nil {
		return err
	}
	names, next, err := s.listQueueNames(prefix, marker, limit)
	if err != nil {
		return err
	}
	b := respBody(ctx)
	if len(names) == 0 && next == "" {
		b = appendEmptyRoot(b, "Queues")
	} else {
		b = appendRootOpen(b, "Queues")
		for _, name := range names {
			var info engine.QueueInfo
			if withMeta {
				info, err = s.queueInfo(name)
				if err != nil {
					continue // deleted meanwhile
				}
			}
			b = appendOpen(b, "Queue")
			b = appendOpen(b, "QueueURL")
			st.scratch = appendQueueURL(st.scratch[:0], ctx, st, name)
			b = appendText(b, st.scratch)
			b = appendClose(b, "QueueURL")
			if withMeta {
				b = appendQueueAttrs(b, &info)
			}
			b = appendClose(b, "Queue")
		}
		if next != "" {
			b = appendElem(b, "NextMarker", next)
		}
		b = appendClose(b, "Queues")
	}
	st.out = b
	s.writeBody(ctx, st, fasthttp.StatusOK)
	return nil
}

// purgeQueue serves smqd's PurgeQueue, DELETE
// /queues/{q}/messages?purge=true (docs/api-compatibility.md): every
// message the queue holds is deleted (engine Queue.Purge), durable as
// deletes are. It answers 200 with how many:
//
//	<PurgeQueue><QueueName>q</QueueName><PurgedMessages>n</PurgedMessages></PurgeQueue>
func (s *Server) purgeQueue(ctx *fasthttp.RequestCtx, st *reqState) error {
	if st.query.receiptHandle.present || len(st.body) > 0 {
		return newAPIError(codeInvalidArgument, "purge=true deletes every message of the queue: it takes no ReceiptHandle and no body")
	}
	q, err := s.queue(st)
	if err != nil {
		return err
	}
	n, err := q.Purge()
	if s.stale(st, q, err) {
		if q, err = s.queue(st); err != nil {
			return err
		}
		n, err = q.Purge()
	}
	if err != nil {
		return err
	}
	b := appendRootOpen(respBody(ctx), "PurgeQueue")
	b = appendElem(b, "QueueName", st.name)
	b = appendIntElem(b, "PurgedMessages", int64(n))
	st.out = appendClose(b, "PurgeQueue")
	s.writeBody(ctx, st, fasthttp.StatusOK)
	return nil
}
