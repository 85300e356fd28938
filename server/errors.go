package server

// The one error table (STYLE §5): every error the server answers with goes
// through here, as an MNS code with its HTTP status (spec §5.2), written as
// the <Error> document of spec §3.11.
//
// Engine errors map to codes in engineErrors; errors the server finds itself
// (request syntax, authentication) are *apiError values carrying their code.
// Anything else is a bug or an I/O failure: 500 InternalError, logged once.

import (
	"context"
	"errors"

	"github.com/smqd/smqd/engine"
)

// errCode is an MNS error code; codes[c] gives its name and status.
type errCode uint8

const (
	codeInternalError errCode = iota
	codeInvalidArgument
	codeMalformedXML
	codeInvalidAuthorizationHeader
	codeMissingAuthorizationHeader
	codeInvalidDateHeader
	codeMissingDateHeader
	codeMissingVersionHeader
	codeInvalidVersionHeader
	codeInvalidRequestURL
	codeInvalidQueryString
	codeMissingReceiptHandle
	codeMissingVisibilityTimeout
	codeReceiptHandleError
	codeInvalidQueueName
	codeQueueNameLengthError
	codeInvalidAccessKeyId
	codeSignatureDoesNotMatch
	codeQueueNotExist
	codeMessageNotExist
	codeTimeExpired
	codeQueueAlreadyExist
	codeServiceUnavailable
	codeInvalidDegist
	codeDiskFull
	codeAccessDenied
	codeTopicNotExist
	codeTopicAlreadyExist
	codeTopicNameInvalid
	codeTopicNameLengthError
	codeSubscriptionNotExist
	codeSubscriptionAlreadyExist
	codeSubscriptionNameInvalid
	codeSubscriptionNameLengthError
	codeEndpointInvalid
	codeQpsLimitExceeded
	codeBackupNotRunning
	numCodes
)

// codes is the table of MNS error codes: name and HTTP status (spec §5.2).
// Codes the spec lists that smqd never emits (QueueDeletedRecently) have
// no row; AccessDenied answers cross-site browser requests (console.go)
// and requests a key's policies refuse (authz.go).
var codes = [numCodes]struct {
	name   string
	status int
}{
	codeInternalError:              {"InternalError", 500},
	codeInvalidArgument:            {"InvalidArgument", 400},
	codeMalformedXML:               {"MalformedXML", 400},
	codeInvalidAuthorizationHeader: {"InvalidAuthorizationHeader", 400},
	codeMissingAuthorizationHeader: {"MissingAuthorizationHeader", 400},
	codeInvalidDateHeader:          {"InvalidDateHeader", 400},
	codeMissingDateHeader:          {"MissingDateHeader", 400},
	codeMissingVersionHeader:       {"MissingVersionHeader", 400},
	codeInvalidVersionHeader:       {"InvalidVersionHeader", 400},
	codeInvalidRequestURL:          {"InvalidRequestURL", 400},
	codeInvalidQueryString:         {"InvalidQueryString", 400},
	codeMissingReceiptHandle:       {"MissingReceiptHandle", 400},
	codeMissingVisibilityTimeout:   {"MissingVisibilityTimeout", 400},
	codeReceiptHandleError:         {"ReceiptHandleError", 400},
	codeInvalidQueueName:           {"InvalidQueueName", 400},
	codeQueueNameLengthError:       {"QueueNameLengthError", 400},
	codeInvalidAccessKeyId:         {"InvalidAccessKeyId", 403},
	codeSignatureDoesNotMatch:      {"SignatureDoesNotMatch", 403},
	codeQueueNotExist:              {"QueueNotExist", 404},
	codeMessageNotExist:            {"MessageNotExist", 404},
	codeTimeExpired:                {"TimeExpired", 408},
	codeQueueAlreadyExist:          {"QueueAlreadyExist", 409},
	// Not in the MNS table: the broker is shutting down (Java retries 503).
	codeServiceUnavailable: {"ServiceUnavailable", 503},
	// Content-MD5 matches the body in neither SDK encoding. The spelling is
	// the service's (spec §5.2), and the one the SDKs map: the Go SDK's
	// client.go initMNSErrors has "InvalidDegist".
	codeInvalidDegist: {"InvalidDegist", 400},
	// Not in the MNS table: free space is below the reserve; new messages
	// and queues are refused, everything else works (retryable, like 503s).
	codeDiskFull: {"DiskFull", 503},
	// A browser request from another site (console.go, crossSite).
	codeAccessDenied: {"AccessDenied", 403},
	// Topic codes (topic spec §5).
	codeTopicNotExist:               {"TopicNotExist", 404},
	codeTopicAlreadyExist:           {"TopicAlreadyExist", 409},
	codeTopicNameInvalid:            {"TopicNameInvalid", 400},
	codeTopicNameLengthError:        {"TopicNameLengthError", 400},
	codeSubscriptionNotExist:        {"SubscriptionNotExist", 404},
	codeSubscriptionAlreadyExist:    {"SubscriptionAlreadyExist", 409},
	codeSubscriptionNameInvalid:     {"SubscriptionNameInvalid", 400},
	codeSubscriptionNameLengthError: {"SubscriptionNameLengthError", 400},
	codeEndpointInvalid:             {"EndpointInvalid", 400},
	// A key over its request rate (authz.go; the service's code and status).
	codeQpsLimitExceeded: {"QpsLimitExceeded", 400},
	// Not in the MNS table: DELETE /backup with no backup running on this
	// node (backup.go).
	codeBackupNotRunning: {"BackupNotRunning", 404},
}

func (c errCode) String() string { return codes[c].name }

// codeNamed returns the code of that name.
func codeNamed(name string) (errCode, bool) {
	for c := errCode(0); c < numCodes; c++ {
		if codes[c].name == name {
			return c, true
		}
	}
	return 0, false
}

// status returns the HTTP status of the code.
func (c errCode) status() int { return codes[c].status }

// engineErrors maps every exported engine error to its code, with the
// message text used on the wire. *engine.ArgumentError matches
// ErrInvalidArgument and contributes its own text.
var engineErrors = [...]struct {
	err  error
	code errCode
	msg  string
}{
	{engine.ErrQueueNotExist, codeQueueNotExist, "the queue does not exist"},
	{engine.ErrQueueAlreadyExist, codeQueueAlreadyExist, "a queue with this name exists with different attributes"},
	{engine.ErrMessageNotExist, codeMessageNotExist, "message not exist"},
	{engine.ErrReceiptHandleError, codeReceiptHandleError, "the receipt handle is not valid"},
	{engine.ErrInvalidArgument, codeInvalidArgument, "invalid argument"},
	{engine.ErrInvalidQueueName, codeInvalidQueueName, "queue names are letters, digits and '-', starting with a letter or digit"},
	{engine.ErrQueueNameLength, codeQueueNameLengthError, "queue names are 1 to 256 characters long"},
	// Overload of long polls is answered like an empty queue (spec §5.3).
	{engine.ErrTooManyLongPolls, codeMessageNotExist, "too many outstanding long polls; message not exist"},
	{engine.ErrClosed, codeServiceUnavailable, "the broker is shutting down"},
	{engine.ErrDiskFull, codeDiskFull, "the broker's disk is full: new messages and queues are refused until space is freed; receives and deletes work"},
	{engine.ErrStorageUnavailable, codeServiceUnavailable, "the broker's storage cannot take changes right now (a new log segment file cannot be made); retry later"},
	// Refused before it ran: the shard's lead is being handed over (or just
	// moved), and the request found no leader to run it within the wait.
	{engine.ErrRetryOnLeader, codeServiceUnavailable, "the queue's shard is handing its lead to another node; the request did not run; retry"},
	// A cluster node's broker of a shard it stopped leading mid-request.
	{engine.ErrNotLeader, codeServiceUnavailable, "this node stopped leading the queue's shard while the request ran (a failover): it may or may not have run (a send retried may be stored twice); retry"},
	{engine.ErrDiverged, codeServiceUnavailable, "the queue's shard is being rebuilt on this node after a failover; retry"},
	{engine.ErrTopicNotExist, codeTopicNotExist, "the topic does not exist"},
	{engine.ErrTopicAlreadyExist, codeTopicAlreadyExist, "a topic with this name exists with different attributes"},
	{engine.ErrInvalidTopicName, codeTopicNameInvalid, "topic names are letters, digits and '-', starting with a letter or digit"},
	{engine.ErrTopicNameLength, codeTopicNameLengthError, "topic names are 1 to 256 characters long"},
	{engine.ErrSubscriptionNotExist, codeSubscriptionNotExist, "the subscription does not exist"},
	{engine.ErrSubscriptionAlreadyExist, codeSubscriptionAlreadyExist, "a subscription with this name exists with different attributes"},
	{engine.ErrInvalidSubscriptionName, codeSubscriptionNameInvalid, "subscription names are letters, digits and '-', starting with a letter or digit"},
	{engine.ErrSubscriptionNameLength, codeSubscriptionNameLengthError, "subscription names are 1 to 256 characters long"},
	{engine.ErrEndpointInvalid, codeEndpointInvalid, "the subscription endpoint is not valid"},
	// Only engine.Open returns it; listed so that the table stays complete.
	{engine.ErrLocked, codeInternalError, "the data directory is used by another broker"},
	// Only a snapshot's export between cluster nodes returns it (its
	// leader then gives its proposals up); listed so that the table stays
	// complete.
	{engine.ErrExportUnsettled, codeServiceUnavailable, "the shard's leader is settling its proposals for a member's snapshot; retry"},
	// GET /backup on a broker in memory or a cluster node (backup.go).
	{engine.ErrBackupUnsupported, codeInvalidRequestURL, "this server has nothing it can back up on its own (in memory, or a cluster node)"},
}

// apiError is an error the server answers with a given code and message.
type apiError struct {
	code errCode
	msg  string
}

func (e *apiError) Error() string { return e.code.String() + ": " + e.msg }

func newAPIError(c errCode, msg string) *apiError { return &apiError{code: c, msg: msg} }

// classify turns any error into its code and wire message. known is false
// for errors that are not in the table (bugs, I/O failures): those answer
// 500 InternalError, and the caller logs them.
func classify(err error) (c errCode, msg string, known bool) {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae.code, ae.msg, true
	}
	var arg *engine.ArgumentError
	if errors.As(err, &arg) {
		return codeInvalidArgument, arg.Field + " " + arg.Msg, true
	}
	var ee *engine.EndpointError
	if errors.As(err, &ee) {
		return codeEndpointInvalid, "the endpoint " + ee.Endpoint + ": " + ee.Msg, true
	}
	var xe *xmlSyntaxError
	if errors.As(err, &xe) {
		return codeMalformedXML, "the request body is not well-formed XML: " + xe.msg, true
	}
	var qe *queryError
	if errors.As(err, &qe) {
		return codeInvalidQueryString, qe.msg, true
	}
	for i := range engineErrors {
		if errors.Is(err, engineErrors[i].err) {
			return engineErrors[i].code, engineErrors[i].msg, true
		}
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		// A long poll cut short by shutdown: the queue looked empty.
		return codeMessageNotExist, "message not exist", true
	}
	return codeInternalError, "internal error", false
}
