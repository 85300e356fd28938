package engine

// What a topic's and a subscription's settings may hold: endpoint forms,
// tags, the publisher's Owner, names (spec §2.6, §3.1).

import (
	"strings"
	"unicode/utf8"
)

// endpointKind is the form of a subscription endpoint (spec §3.1).
type endpointKind uint8

const (
	endpointQueue endpointKind = iota + 1 // delivered to (publish.go)
	endpointOther                         // mail, SMS, mobile push: stored, never delivered
	endpointHTTP                          // pushed to (push.go)
)

// parseEndpoint checks an endpoint's form and returns its kind and, for a
// queue endpoint, the queue name. Region and account are never checked:
// SDKs aimed at a local server fill them with junk (spec §0.6).
func parseEndpoint(ep string) (endpointKind, string, error) {
	bad := func(msg string) error { return &EndpointError{Endpoint: ep, Msg: msg} }
	if ep == "" {
		return 0, "", bad("is empty")
	}
	if len(ep) > maxEndpointLen {
		return 0, "", bad("is longer than 1024 bytes")
	}
	switch {
	case strings.HasPrefix(ep, "acs:mns:"):
		parts := strings.SplitN(ep, ":", 5)
		if len(parts) != 5 || !strings.HasPrefix(parts[4], "queues/") {
			return 0, "", bad("a queue endpoint is acs:mns:{region}:{account}:queues/{queue}")
		}
		name := parts[4][len("queues/"):]
		if ValidateQueueName(name) != nil {
			return 0, "", bad("the queue name of a queue endpoint is 1 to 256 letters, digits and '-', starting with a letter or digit")
		}
		return endpointQueue, name, nil
	case hasPrefixFold(ep, "http://"), hasPrefixFold(ep, "https://"):
		if _, err := parsePushURL(ep); err != nil {
			return 0, "", bad(err.Error())
		}
		return endpointHTTP, "", nil
	case strings.HasPrefix(ep, "mail:directmail:") && len(ep) > len("mail:directmail:"),
		strings.HasPrefix(ep, "sms:directsms:") && len(ep) > len("sms:directsms:"),
		strings.HasPrefix(ep, "sms:dayu:") && len(ep) > len("sms:dayu:"),
		strings.HasPrefix(ep, "push:") && len(ep) > len("push:"):
		return endpointOther, "", nil
	}
	return 0, "", bad("is of no known form: http(s)://host[:port][/path], acs:mns:{region}:{account}:queues/{queue}, mail:directmail:{address}, sms:directsms:{phone} or push:{appKey}")
}

// sameSubscription reports whether a Subscribe with cfg repeats the
// subscription made with old. Queue endpoints are the same when they name
// the same queue, whatever their region and account (spec §0.6: SDKs fill
// them in from the host they were given, so one set-up run by another SDK
// or through another host name sends other ones).
func sameSubscription(old, cfg SubscriptionConfig) bool {
	if old == cfg {
		return true
	}
	ko, qo, err1 := parseEndpoint(old.Endpoint)
	kc, qc, err2 := parseEndpoint(cfg.Endpoint)
	if err1 != nil || err2 != nil || ko != endpointQueue || kc != endpointQueue || qo != qc {
		return false
	}
	cfg.Endpoint = old.Endpoint
	return old == cfg
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// checkTag checks a FilterTag or MessageTag: at most 16 characters, and
// none a control character (a SIMPLIFIED push carries the tag in an HTTP
// header, which cannot hold one).
func checkTag(field, tag string) error {
	if !utf8.ValidString(tag) || utf8.RuneCountInString(tag) > MaxFilterTagLen {
		return argErr(field, "must be at most %d characters", MaxFilterTagLen)
	}
	for i := 0; i < len(tag); i++ {
		if c := tag[i]; c < 0x20 || c == 0x7f {
			return argErr(field, "must not contain control characters (byte 0x%02x at %d)", c, i)
		}
	}
	return nil
}

// maxOwnerBytes bounds PublishInput.Owner (a push envelope keeps 255).
const maxOwnerBytes = 255

// checkOwner refuses an Owner no push could carry: it goes into HTTP
// headers, where a control character made every SIMPLIFIED push of the
// message fail until its retries ended (embedding audit 2, 2026-12-06),
// and into push envelopes, which cut it at 255 bytes.
func checkOwner(owner string) error {
	if len(owner) > maxOwnerBytes || !utf8.ValidString(owner) {
		return argErr("Owner", "must be at most %d bytes of UTF-8", maxOwnerBytes)
	}
	for i := 0; i < len(owner); i++ {
		if c := owner[i]; c < 0x20 || c == 0x7f {
			return argErr("Owner", "must not contain control characters (byte 0x%02x at %d)", c, i)
		}
	}
	return nil
}

// validateTopicName applies the queue name rules with the topic errors.
func validateTopicName(name string, errLen, errChars error) error {
	switch ValidateQueueName(name) {
	case nil:
		return nil
	case ErrQueueNameLength:
		return errLen
	}
	return errChars
}
