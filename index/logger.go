package index

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
)

// badgerLogger routes Badger's printf-style logging into slog.
//
// Badger logs a line for every flush, compaction and start-up step at Info;
// none of that is interesting to a broker operator, so Info goes to slog's
// Debug level and Badger's own Debug is dropped. Warnings and errors keep
// their level. The handler's Enabled check runs before any formatting, so a
// disabled level costs one call.
type badgerLogger struct {
	l *slog.Logger // never nil; the Store's logger with component=badger
}

func (b badgerLogger) log(level slog.Level, format string, args ...any) {
	if !b.l.Enabled(context.Background(), level) {
		return
	}
	// Badger's format strings often end in "\n"; slog adds its own framing.
	b.l.Log(context.Background(), level, strings.TrimRight(fmt.Sprintf(format, args...), "\n"))
}

// Errorf implements badger.Logger.
func (b badgerLogger) Errorf(format string, args ...any) { b.log(slog.LevelError, format, args...) }

// Warningf implements badger.Logger.
func (b badgerLogger) Warningf(format string, args ...any) { b.log(slog.LevelWarn, format, args...) }

// Infof implements badger.Logger; Badger's Info is our Debug (see type doc).
func (b badgerLogger) Infof(format string, args ...any) { b.log(slog.LevelDebug, format, args...) }

// Debugf implements badger.Logger; Badger's Debug output is dropped.
func (b badgerLogger) Debugf(string, ...any) {}

// discardLogger returns a logger that drops everything (Options.Logger nil).
func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
