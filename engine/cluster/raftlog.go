package cluster

import (
	"fmt"
	"log/slog"
)

// raftLogger sends etcd raft's log to slog (its Info at Debug).
type raftLogger struct{ l *slog.Logger }

func (r raftLogger) Debug(v ...any)              {}
func (r raftLogger) Debugf(f string, v ...any)   { r.l.Debug(fmt.Sprintf(f, v...)) }
func (r raftLogger) Info(v ...any)               { r.l.Debug(fmt.Sprint(v...)) }
func (r raftLogger) Infof(f string, v ...any)    { r.l.Debug(fmt.Sprintf(f, v...)) }
func (r raftLogger) Warning(v ...any)            { r.l.Warn(fmt.Sprint(v...)) }
func (r raftLogger) Warningf(f string, v ...any) { r.l.Warn(fmt.Sprintf(f, v...)) }
func (r raftLogger) Error(v ...any)              { r.l.Error(fmt.Sprint(v...)) }
func (r raftLogger) Errorf(f string, v ...any)   { r.l.Error(fmt.Sprintf(f, v...)) }
func (r raftLogger) Fatal(v ...any)              { r.l.Error(fmt.Sprint(v...)); panic(fmt.Sprint(v...)) }
func (r raftLogger) Fatalf(f string, v ...any) {
	r.l.Error(fmt.Sprintf(f, v...))
	panic(fmt.Sprintf(f, v...))
}
func (r raftLogger) Panic(v ...any)            { panic(fmt.Sprint(v...)) }
func (r raftLogger) Panicf(f string, v ...any) { panic(fmt.Sprintf(f, v...)) }
