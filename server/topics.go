package server

// Topic operations (topic spec §2): CreateTopic, SetTopicAttributes,
// GetTopicAttributes, DeleteTopic, ListTopic, Subscribe,
// SetSubscriptionAttributes, GetSubscriptionAttributes, Unsubscribe,
// ListSubscriptionByTopic and PublishMessage. Request documents are parsed
// by local name, any namespace or order, unknown elements ignored; answers
// use the spec's status codes, element order and errors.
//
// A cluster (NewCluster) places each topic on a shard by its name, as it
// places queues (engine/topic_replica.go): a topic call runs on that
// shard's leader, here or forwarded, as a queue call does (cluster.go).
// ListTopic merges the shards from this node's replicas, as ListQueue.

import (
	"bytes"
	"errors"
	"strconv"

	"github.com/smqd/smqd/engine"
	"github.com/valyala/fasthttp"
)

// serveTopic decodes the names of a topic operation and runs it.
func (s *Server) serveTopic(ctx *fasthttp.RequestCtx, st *reqState, r routed) error {
	var err error
	if r.queue != nil {
		st.name, err = decodeName(st.name[:0], r.queue, engine.ErrTopicNameLength, engine.ErrInvalidTopicName, codeTopicNameInvalid)
		if err != nil {
			return err
		}
	}
	if r.sub != nil {
		st.sub, err = decodeName(st.sub[:0], r.sub, engine.ErrSubscriptionNameLength, engine.ErrInvalidSubscriptionName, codeSubscriptionNameInvalid)
		if err != nil {
			return err
		}
	}
	switch {
	case s.c == nil:
		if st.b = s.broker(); st.b == nil {
			return errReopening
		}
	case r.op == opListTopic:
		if err := s.clusterReadBarrier(); err != nil {
			return err
		}
	default:
		s.serveClusterQueue(ctx, st, r.op) // the topic's shard's leader: cluster.go
		return nil
	}
	return s.dispatchTopic(ctx, st, r.op)
}

// dispatchTopic runs a topic operation on st.b (ListTopic: on every
// broker this server serves), writing its answer, or returns the error to
// answer.
func (s *Server) dispatchTopic(ctx *fasthttp.RequestCtx, st *reqState, op op) error {
	st.ran = true
	set := st.query.metaOverride.present && isTrue(st.query.metaOverride.val)
	switch op {
	case opListTopic:
		return s.listTopics(ctx, st)
	case opCreateTopic:
		if set {
			st.op = opSetTopicAttributes
			return s.setTopicAttributes(ctx, st)
		}
		return s.createTopic(ctx, st)
	case opGetTopicAttributes:
		return s.getTopicAttributes(ctx, st)
	case opDeleteTopic:
		return s.deleteTopic(ctx, st)
	case opSubscribe:
		if set {
			st.op = opSetSubscriptionAttributes
			return s.setSubscriptionAttributes(ctx, st)
		}
		return s.subscribe(ctx, st)
	case opGetSubscriptionAttributes:
		return s.getSubscriptionAttributes(ctx, st)
	case opUnsubscribe:
		return s.unsubscribe(ctx, st)
	case opListSubscriptionByTopic:
		return s.listSubscriptions(ctx, st)
	case opPublishMessage:
		return s.publish(ctx, st)
	}
	return newAPIError(codeInvalidRequestURL, "no such topic operation")
}

// decodeName percent-decodes a path segment and checks it as a topic or
// subscription name (topic spec §4.3).
func decodeName(dst, seg []byte, errLen, errChars error, code errCode) ([]byte, error) {
	dst, ok := appendPercentDecoded(dst, seg)
	if !ok {
		return dst, newAPIError(code, "the name in the path has a malformed percent-escape")
	}
	switch engine.ValidateQueueName(string(dst)) {
	case nil:
		return dst, nil
	case engine.ErrQueueNameLength:
		return dst, errLen
	}
	return dst, errChars
}

// appendHostURL appends http(s)://<host>.
func appendHostURL(b []byte, ctx *fasthttp.RequestCtx, st *reqState) []byte {
	if st.tls {
		b = append(b, "https://"...)
	} else {
		b = append(b, "http://"...)
	}
	return append(b, ctx.Request.Header.Host()...)
}

// appendTopicURL appends http(s)://<host>/topics/<t> (spec §1.3).
func appendTopicURL(b []byte, ctx *fasthttp.RequestCtx, st *reqState, topic string) []byte {
	b = appendHostURL(b, ctx, st)
	b = append(b, "/topics/"...)
	return append(b, topic...)
}

// appendSubURL appends http(s)://<host>/topics/<t>/subscriptions/<s>.
func appendSubURL(b []byte, ctx *fasthttp.RequestCtx, st *reqState, topic, sub string) []byte {
	b = appendTopicURL(b, ctx, st, topic)
	b = append(b, "/subscriptions/"...)
	return append(b, sub...)
}

// accountOf is the account id a self-hosted server reports as TopicOwner
// and Subscriber: the first label of the Host header (spec §2.8), or
// "smqd" when there is none or it is no printable ASCII of at most 255
// bytes.
func accountOf(ctx *fasthttp.RequestCtx) string {
	h := ctx.Request.Header.Host()
	if i := bytes.LastIndexByte(h, ':'); i >= 0 && bytes.IndexByte(h[i:], ']') < 0 {
		h = h[:i]
	}
	if i := bytes.IndexByte(h, '.'); i >= 0 {
		h = h[:i]
	}
	if len(h) == 0 || len(h) > 255 {
		return "smqd"
	}
	for _, c := range h {
		if c <= ' ' || c >= 0x7f {
			return "smqd" // no account id: a push's headers could not carry it (engine checkOwner)
		}
	}
	return string(h)
}

// parseRoot parses a request document whose root must be root. empty
// reports an empty body (allowed or not by the caller).
func parseRoot(d *xmlDoc, body []byte, root string) (empty bool, err error) {
	err = d.parse(body)
	if err == errEmptyDocument {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	if r := d.root(); !is(d.name(r), root) {
		return false, argError(root, "is the expected root element, not "+strconv.Quote(string(d.name(r))))
	}
	return false, nil
}

// decodeTopicAttrs decodes a Topic document (CreateTopic and
// SetTopicAttributes, spec §2.2); MessageRetentionPeriod is ignored.
func decodeTopicAttrs(d *xmlDoc, body []byte) (engine.TopicPatch, error) {
	var p engine.TopicPatch
	if empty, err := parseRoot(d, body, "Topic"); empty || err != nil {
		return p, err
	}
	root := d.root()
	for c := d.firstChild(root); c >= 0; c = d.nextSibling(c) {
		v := d.textOf(c)
		switch string(d.name(c)) {
		case "MaximumMessageSize":
			n, err := intInRange("MaximumMessageSize", v, engine.MinMessageBytes, engine.MaxMessageBytes, "bytes")
			if err != nil {
				return p, err
			}
			x := int(n)
			p.MaxMessageBytes = &x
		case "LoggingEnabled":
			x, err := parseBool("LoggingEnabled", v)
			if err != nil {
				return p, err
			}
			p.LoggingEnabled = &x
		}
	}
	return p, nil
}

// subDoc is a decoded Subscription document: what was present.
type subDoc struct {
	cfg                              engine.SubscriptionConfig
	hasEndpoint, hasTag, hasStrategy bool
	dlq                              *string // the dead-letter extension, when present (spec §3.8)
}

// decodeSubscription decodes a Subscription document (Subscribe and, with
// set, SetSubscriptionAttributes, spec §2.6, §2.7). An empty FilterTag is
// absent. A Set ignores Endpoint and NotifyContentFormat, whatever they
// hold (Java echoes a whole SubscriptionMeta).
func decodeSubscription(d *xmlDoc, body []byte, set bool) (subDoc, error) {
	var sd subDoc
	if empty, err := parseRoot(d, body, "Subscription"); empty || err != nil {
		return sd, err
	}
	root := d.root()
	for c := d.firstChild(root); c >= 0; c = d.nextSibling(c) {
		v := string(bytes.TrimSpace(d.textOf(c)))
		var err error
		switch string(d.name(c)) {
		case "Endpoint":
			sd.cfg.Endpoint, sd.hasEndpoint = v, v != ""
		case "FilterTag":
			// Byte for byte, as the MessageTag it is compared with (spec
			// §2.6): blanks are part of a tag.
			tag := string(d.textOf(c))
			sd.cfg.FilterTag, sd.hasTag = tag, tag != ""
		case "NotifyStrategy":
			if v != "" {
				sd.cfg.Strategy, err = engine.ParseNotifyStrategy(v)
				sd.hasStrategy = true
			}
		case "NotifyContentFormat":
			if v != "" && !set {
				sd.cfg.Format, err = engine.ParseNotifyContentFormat(v)
			}
		case "DeadLetterTargetQueue", "DlqPolicy":
			var p engine.ConfigPatch
			if err = decodeDeadLetter(d, c, &p); err == nil && p.DeadLetterQueue != nil {
				sd.dlq = p.DeadLetterQueue
				sd.cfg.DeadLetterQueue = *p.DeadLetterQueue
			}
		}
		if err != nil {
			return sd, err
		}
	}
	return sd, nil
}

// decodePublish decodes a PublishMessage document (spec §2.11).
// UserProperties and SystemProperties are copied to queue deliveries;
// MessageAttributes (mail, SMS, push) and MessageGroupId are accepted and
// not used.
func decodePublish(d *xmlDoc, body []byte, props *[]engine.Property) (engine.PublishInput, error) {
	var in engine.PublishInput
	empty, err := parseRoot(d, body, "Message")
	if empty {
		return in, &xmlSyntaxError{msg: "the request body is empty; expected a Message document"}
	}
	if err != nil {
		return in, err
	}
	haveBody := false
	root := d.root()
	for c := d.firstChild(root); c >= 0; c = d.nextSibling(c) {
		switch string(d.name(c)) {
		case "MessageBody":
			if d.nodes[c].hasChildren {
				return in, argError("MessageBody", "must be text, not elements (escape '<' as &lt;)")
			}
			haveBody, in.Body = true, d.textOf(c)
		case "MessageTag":
			in.Tag = string(d.textOf(c))
		case "UserProperties":
			if err := decodeProps(d, c, "PropertyValue", false, props); err != nil {
				return in, err
			}
		case "SystemProperties":
			if err := decodeProps(d, c, "SystemPropertyValue", true, props); err != nil {
				return in, err
			}
		}
	}
	in.Properties = *props
	if !haveBody {
		return in, argError("MessageBody", "is missing")
	}
	if len(in.Body) == 0 {
		return in, argError("MessageBody", "must not be empty")
	}
	return in, nil
}

func (s *Server) createTopic(ctx *fasthttp.RequestCtx, st *reqState) error {
	p, err := decodeTopicAttrs(&st.doc, st.body)
	if err != nil {
		return err
	}
	cfg := p.Apply(engine.DefaultTopicConfig())
	name := string(st.name)
	created, err := st.b.CreateTopic(name, cfg)
	if err != nil {
		return err
	}
	st.scratch = appendTopicURL(st.scratch[:0], ctx, st, name)
	ctx.Response.Header.SetBytesV("Location", st.scratch)
	if created {
		ctx.Response.SetStatusCode(fasthttp.StatusCreated)
	} else {
		ctx.Response.SetStatusCode(fasthttp.StatusNoContent)
	}
	return nil
}

func (s *Server) setTopicAttributes(ctx *fasthttp.RequestCtx, st *reqState) error {
	p, err := decodeTopicAttrs(&st.doc, st.body)
	if err != nil {
		return err
	}
	if err := st.b.SetTopicAttributes(string(st.name), p); err != nil {
		return err
	}
	ctx.Response.SetStatusCode(fasthttp.StatusNoContent)
	return nil
}

// appendTopicAttrs appends the 7 elements of spec §2.3, in its order.
func appendTopicAttrs(b []byte, info *engine.TopicInfo) []byte {
	b = appendElem(b, "TopicName", info.Name)
	b = appendIntElem(b, "CreateTime", unixSeconds(info.CreateTime))
	b = appendIntElem(b, "LastModifyTime", unixSeconds(info.LastModifyTime))
	b = appendIntElem(b, "MaximumMessageSize", int64(info.Config.MaxMessageBytes))
	b = appendIntElem(b, "MessageRetentionPeriod", int64(info.Retention.Seconds()))
	b = appendIntElem(b, "MessageCount", info.MessageCount)
	return appendBoolElem(b, "LoggingEnabled", info.Config.LoggingEnabled)
}

func (s *Server) getTopicAttributes(ctx *fasthttp.RequestCtx, st *reqState) error {
	info, err := st.b.GetTopicAttributes(string(st.name))
	if err != nil {
		return err
	}
	b := appendRootOpen(respBody(ctx), "Topic")
	b = appendTopicAttrs(b, &info)
	st.out = appendClose(b, "Topic")
	s.writeBody(ctx, st, fasthttp.StatusOK)
	return nil
}

// deleteTopic answers 204 also for a missing topic (spec §2.4).
func (s *Server) deleteTopic(ctx *fasthttp.RequestCtx, st *reqState) error {
	if err := st.b.DeleteTopic(string(st.name)); err != nil && !errors.Is(err, engine.ErrTopicNotExist) {
		return err
	}
	ctx.Response.SetStatusCode(fasthttp.StatusNoContent)
	return nil
}

// listHeaders reads the four list headers (spec §1.4, queue spec §2.5).
func listHeaders(ctx *fasthttp.RequestCtx) (prefix, marker string, limit int, withMeta bool, err error) {
	h := &ctx.Request.Header
	limit = 1000
	if v := h.Peek("X-Mns-Ret-Number"); len(v) > 0 {
		n, err := intInRange("x-mns-ret-number", v, 1, 1000, "")
		if err != nil {
			return "", "", 0, false, err
		}
		limit = int(n)
	}
	if v := h.Peek("X-Mns-With-Meta"); len(v) > 0 {
		withMeta = isTrue(v)
	}
	prefix = string(bytes.TrimSpace(h.Peek("X-Mns-Prefix")))
	marker = string(bytes.TrimSpace(h.Peek("X-Mns-Marker")))
	return prefix, marker, limit, withMeta, nil
}

// listTopics serves ListTopic (spec §2.5): paged as ListQueue, the marker
// being the name of the first topic of the next page.
func (s *Server) listTopics(ctx *fasthttp.RequestCtx, st *reqState) error {
	prefix, marker, limit, withMeta, err := listHeaders(ctx)
	if err != nil {
		return err
	}
	names, next, err := s.listTopicNames(prefix, marker, limit)
	if err != nil {
		return err
	}
	b := respBody(ctx)
	if len(names) == 0 && next == "" {
		st.out = appendEmptyRoot(b, "Topics")
		s.writeBody(ctx, st, fasthttp.StatusOK)
		return nil
	}
	b = appendRootOpen(b, "Topics")
	for _, name := range names {
		var info engine.TopicInfo
		if withMeta {
			if info, err = s.topicInfo(name); err != nil {
				continue // deleted meanwhile
			}
		}
		b = appendOpen(b, "Topic")
		st.scratch = appendTopicURL(st.scratch[:0], ctx, st, name)
		b = appendElem(b, "TopicURL", st.scratch)
		if withMeta {
			b = appendTopicAttrs(b, &info)
		}
		b = appendClose(b, "Topic")
	}
	if next != "" {
		b = appendElem(b, "NextMarker", next)
	}
	st.out = appendClose(b, "Topics")
	s.writeBody(ctx, st, fasthttp.StatusOK)
	return nil
}

func (s *Server) subscribe(ctx *fasthttp.RequestCtx, st *reqState) error {
	sd, err := decodeSubscription(&st.doc, st.body, false)
	if err != nil {
		return err
	}
	if !sd.hasEndpoint {
		return argError("Endpoint", "is missing")
	}
	if q, ok := engine.QueueEndpointName(sd.cfg.Endpoint); ok {
		if err := s.authorizeSendTo(st, q, "the subscription's endpoint"); err != nil {
			return err
		}
	}
	if err := s.authorizeSendTo(st, sd.cfg.DeadLetterQueue, "the subscription's dead-letter queue"); err != nil {
		return err
	}
	topic, sub := string(st.name), string(st.sub)
	created, err := st.b.Subscribe(topic, sub, sd.cfg)
	if err != nil {
		return err
	}
	st.scratch = appendSubURL(st.scratch[:0], ctx, st, topic, sub)
	ctx.Response.Header.SetBytesV("Location", st.scratch)
	if created {
		ctx.Response.SetStatusCode(fasthttp.StatusCreated)
	} else {
		ctx.Response.SetStatusCode(fasthttp.StatusNoContent)
	}
	return nil
}

// setSubscriptionAttributes applies NotifyStrategy and FilterTag (Java
// sends it); Endpoint and NotifyContentFormat are ignored (spec §2.7).
func (s *Server) setSubscriptionAttributes(ctx *fasthttp.RequestCtx, st *reqState) error {
	sd, err := decodeSubscription(&st.doc, st.body, true)
	if err != nil {
		return err
	}
	var p engine.SubscriptionPatch
	if sd.hasStrategy {
		p.Strategy = &sd.cfg.Strategy
	}
	if sd.hasTag {
		p.FilterTag = &sd.cfg.FilterTag
	}
	p.DeadLetterQueue = sd.dlq
	if sd.dlq != nil {
		if err := s.authorizeSendTo(st, *sd.dlq, "the subscription's dead-letter queue"); err != nil {
			return err
		}
	}
	if err := st.b.SetSubscriptionAttributes(string(st.name), string(st.sub), p); err != nil {
		return err
	}
	ctx.Response.SetStatusCode(fasthttp.StatusNoContent)
	return nil
}

// appendSubAttrs appends the elements of spec §2.8, in its order;
// FilterTag only when set.
func appendSubAttrs(b []byte, info *engine.SubscriptionInfo, account string) []byte {
	b = appendElem(b, "SubscriptionName", info.Name)
	b = appendElem(b, "Subscriber", account)
	b = appendElem(b, "TopicOwner", account)
	b = appendElem(b, "TopicName", info.Topic)
	b = appendElem(b, "Endpoint", info.Config.Endpoint)
	b = appendElem(b, "NotifyStrategy", info.Config.Strategy.String())
	b = appendElem(b, "NotifyContentFormat", info.Config.Format.String())
	if info.Config.FilterTag != "" {
		b = appendElem(b, "FilterTag", info.Config.FilterTag)
	}
	if info.Config.DeadLetterQueue != "" {
		b = appendElem(b, "DeadLetterTargetQueue", info.Config.DeadLetterQueue) // flat: spec §3.8
	}
	b = appendIntElem(b, "CreateTime", unixSeconds(info.CreateTime))
	return appendIntElem(b, "LastModifyTime", unixSeconds(info.LastModifyTime))
}

func (s *Server) getSubscriptionAttributes(ctx *fasthttp.RequestCtx, st *reqState) error {
	info, err := st.b.GetSubscriptionAttributes(string(st.name), string(st.sub))
	if err != nil {
		return err
	}
	b := appendRootOpen(respBody(ctx), "Subscription")
	b = appendSubAttrs(b, &info, accountOf(ctx))
	st.out = appendClose(b, "Subscription")
	s.writeBody(ctx, st, fasthttp.StatusOK)
	return nil
}

// unsubscribe answers 204 also for a missing subscription, 404
// TopicNotExist for a missing topic (spec §2.9).
func (s *Server) unsubscribe(ctx *fasthttp.RequestCtx, st *reqState) error {
	if err := st.b.Unsubscribe(string(st.name), string(st.sub)); err != nil && !errors.Is(err, engine.ErrSubscriptionNotExist) {
		return err
	}
	ctx.Response.SetStatusCode(fasthttp.StatusNoContent)
	return nil
}

// listSubscriptions serves ListSubscriptionByTopic (spec §2.10).
func (s *Server) listSubscriptions(ctx *fasthttp.RequestCtx, st *reqState) error {
	prefix, marker, limit, withMeta, err := listHeaders(ctx)
	if err != nil {
		return err
	}
	topic := string(st.name)
	names, next, err := st.b.ListSubscriptions(topic, prefix, marker, limit)
	if err != nil {
		return err
	}
	b := respBody(ctx)
	if len(names) == 0 && next == "" {
		st.out = appendEmptyRoot(b, "Subscriptions")
		s.writeBody(ctx, st, fasthttp.StatusOK)
		return nil
	}
	account := accountOf(ctx)
	b = appendRootOpen(b, "Subscriptions")
	for _, name := range names {
		var info engine.SubscriptionInfo
		if withMeta {
			if info, err = st.b.GetSubscriptionAttributes(topic, name); err != nil {
				continue // deleted meanwhile
			}
		}
		b = appendOpen(b, "Subscription")
		st.scratch = appendSubURL(st.scratch[:0], ctx, st, topic, name)
		b = appendElem(b, "SubscriptionURL", st.scratch)
		if withMeta {
			b = appendSubAttrs(b, &info, account)
		}
		b = appendClose(b, "Subscription")
	}
	if next != "" {
		b = appendElem(b, "NextMarker", next)
	}
	st.out = appendClose(b, "Subscriptions")
	s.writeBody(ctx, st, fasthttp.StatusOK)
	return nil
}

// publish serves PublishMessage: 201 with MessageId and MessageBodyMD5
// once the message is durable in every matching queue subscription.
func (s *Server) publish(ctx *fasthttp.RequestCtx, st *reqState) error {
	st.props = st.props[:0]
	in, err := decodePublish(&st.doc, st.body, &st.props)
	if err != nil {
		return err
	}
	in.Owner = accountOf(ctx)
	res, err := st.b.Publish(string(st.name), in)
	if err != nil {
		return err
	}
	b := appendRootOpen(respBody(ctx), "Message")
	b = appendOpen(b, "MessageId")
	b = res.ID.AppendText(b)
	b = appendClose(b, "MessageId")
	b = appendOpen(b, "MessageBodyMD5")
	b = engine.MD5Hex(b, res.MD5)
	b = appendClose(b, "MessageBodyMD5")
	st.out = appendClose(b, "Message")
	s.writeBody(ctx, st, fasthttp.StatusCreated)
	return nil
}
