package server

import (
	"errors"
	"log/slog"
	"time"

	"github.com/smqd/smqd/engine"
)

// DefaultMaxRequestBodyBytes is the default request body cap: 8 MiB.
//
// The cap has to admit the largest request a client can legitimately send.
// That is a BatchSendMessage of 16 bodies of 64 KiB (MaximumMessageSize's
// upper bound): 1 MiB of body text before any markup, so 1 MiB itself is too
// small. Bodies count after entity decoding (spec §6), and @alicloud/mns or
// Go may send raw text that the XML encoding blows up: a named entity
// (&quot;) spells one byte with six, so 16 x 64 KiB x 6 = 6 MiB, plus the
// markup. 8 MiB covers that with room to spare. (The engine separately
// limits a batch to 64 KiB of body in total; the transport cap must not be
// what answers first, or the client gets a less precise error.)
const DefaultMaxRequestBodyBytes = 8 << 20

// Options configures a Server. The zero value is not usable: give
// Credentials or set NoAuth. Durations are Go durations; the wire's seconds
// are converted in the handlers.
type Options struct {
	// Credentials maps access key ids to secrets (MNS signature v2).
	Credentials map[string]string
	// NoAuth skips authentication (local development only).
	NoAuth bool
	// MaxRequestBodyBytes caps a request body; a larger one is refused with
	// 400 InvalidArgument before it is read in full. Default
	// DefaultMaxRequestBodyBytes.
	MaxRequestBodyBytes int
	// MaxClockSkew is how far a request's Date may be from Now before it is
	// refused with 408 TimeExpired. Default 15 minutes (spec §2.1).
	MaxClockSkew time.Duration
	// ReadTimeout bounds reading one request (headers and body). Default 60 s.
	ReadTimeout time.Duration
	// WriteTimeout bounds writing one response. Default 60 s.
	WriteTimeout time.Duration
	// IdleTimeout bounds how long a keep-alive connection waits for its next
	// request. Default 120 s.
	IdleTimeout time.Duration
	// Name is the Server response header. Default "smqd".
	Name string
	// Now is the time source for the signature date check; nil means time.Now.
	Now func() time.Time
	// Logger receives lifecycle messages and errors; nil discards them.
	Logger *slog.Logger
}

// DefaultOptions returns Options with every default filled in and no
// credentials.
func DefaultOptions() Options {
	var o Options
	return o.withDefaults()
}

func (o Options) withDefaults() Options {
	if o.MaxRequestBodyBytes <= 0 {
		o.MaxRequestBodyBytes = DefaultMaxRequestBodyBytes
	}
	if o.MaxClockSkew <= 0 {
		o.MaxClockSkew = 15 * time.Minute
	}
	if o.ReadTimeout <= 0 {
		o.ReadTimeout = 60 * time.Second
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 60 * time.Second
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = 120 * time.Second
	}
	if o.Name == "" {
		o.Name = "smqd"
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Validate reports a configuration that cannot serve requests.
func (o Options) Validate() error {
	if !o.NoAuth && len(o.Credentials) == 0 {
		return errors.New("server: no credentials configured and NoAuth not set")
	}
	for id, secret := range o.Credentials {
		if id == "" || secret == "" {
			return errors.New("server: empty access key id or secret")
		}
		for i := 0; i < len(id); i++ {
			if id[i] == ':' || id[i] <= ' ' {
				return errors.New("server: access key id must not contain ':' or blanks")
			}
		}
	}
	// Make sure the batch send that MaxBatch x MaxMessageBytes allows fits.
	if o.MaxRequestBodyBytes > 0 && o.MaxRequestBodyBytes < engine.MaxMessageBytes+4096 {
		return errors.New("server: MaxRequestBodyBytes is smaller than one maximal message")
	}
	return nil
}
