package server

// GET /backup: an online backup, streamed as the response's body: of a
// single node (engine.Broker.Backup), or of a whole cluster, each shard
// exported by its leader (cluster.Node.Backup), through any node. Not an
// MNS operation; it is signed as one, so that only a holder of an access
// key gets the broker's messages and the credentials files
// (Options.BackupFiles) in it.
//
// The status and headers leave before the backup starts, so a failure
// midway cannot change them: the body then ends without the archive's end
// frame, and a reader of it (engine.Restore, smqctl backup) refuses it as
// damaged. The failure is logged. One backup runs at a time; another is
// answered 503 ServiceUnavailable. Each write of the body gets WriteTimeout
// afresh, so a backup may take longer than one response may. ?rate=N caps
// it at N bytes a second (engine.BackupOptions.BytesPerSecond).
//
// DELETE /backup (signed, smqd:CancelBackup) ends the backup running on
// this node, as its client's hang-up does: a client that stays connected
// and reads slowly holds the slot (and, in a cluster, every member's
// dead-letter moves) as long as it likes, and only a restart ended it.

import (
	"bufio"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/smqd/smqd/engine"
	"github.com/smqd/smqd/engine/cluster"
)

func (s *Server) serveBackup(ctx *fasthttp.RequestCtx, st *reqState) {
	var b *engine.Broker
	if s.c == nil {
		if b = s.broker(); b == nil {
			s.fail(ctx, st, errReopening)
			return
		}
		switch err := b.CanBackup(); {
		case errors.Is(err, engine.ErrBackupUnsupported):
			s.fail(ctx, st, newAPIError(codeInvalidRequestURL, "this server keeps its messages in memory (--in-memory): there is nothing durable to back up"))
			return
		case err != nil:
			s.fail(ctx, st, err) // closed: 503
			return
		}
	}
	if s.c != nil {
		if err := s.c.LeadersReachable(); err != nil {
			// Known before the 200: the export waited 30 s for a leader
			// and the archive read as damaged (console2 audit, 2026-12-06).
			s.fail(ctx, st, newAPIError(codeServiceUnavailable, "a cluster backup needs a leader of every shard that this node reaches: "+err.Error()+"; retry"))
			return
		}
	}
	var rate int64
	if v := ctx.QueryArgs().Peek("rate"); len(v) > 0 {
		r, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil || r <= 0 {
			s.fail(ctx, st, newAPIError(codeInvalidArgument, "rate must be a positive number of bytes a second, not "+strconv.Quote(string(v))))
			return
		}
		rate = r
	}
	// The slot is since (set before running, cleared after it: a scrape
	// that finds the slot held finds its start too; review V), in
	// monotonic nanoseconds, which a step of the wall clock leaves alone.
	if !s.backups.since.CompareAndSwap(0, monoNow()) {
		s.fail(ctx, st, newAPIError(codeServiceUnavailable, "a backup is running already; try again once it is done"))
		return
	}
	s.backups.running.Store(true)
	stop := make(chan struct{})
	s.backups.mu.Lock()
	s.backups.stop = stop
	s.backups.mu.Unlock()
	reqID := string(st.reqID) // st is recycled once this handler returns
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.SetContentType("application/octet-stream")
	ctx.Response.Header.Set("Content-Disposition", `attachment; filename="smqd.backup"`)
	conn, timeout := ctx.Conn(), s.opts.WriteTimeout
	ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
		defer s.backups.since.Store(0)
		defer s.backups.running.Store(false)
		defer s.backups.endStop(stop)
		// A client that hangs up ends the backup (engine.BackupOptions.Cancel):
		// a capped backup's writes reach the connection only once its
		// buffers fill, hours at a low rate, with the slot held meanwhile.
		// So does DELETE /backup (stop).
		var cc clientCtx
		cc.reset(s.base, &s.watch, conn)
		defer cc.finish()
		hungUp := cc.Done() // here: Done makes the watch, which finish undoes
		cancel := make(chan struct{})
		ended := make(chan struct{})
		defer close(ended)
		go func() {
			select {
			case <-hungUp:
			case <-stop:
			case <-ended:
				return
			}
			close(cancel)
		}()
		start := time.Now()
		dw := &deadlineWriter{w: w, conn: conn, timeout: timeout, closing: &s.closing}
		var attrs []any
		var err error
		if b != nil {
			var info engine.BackupInfo
			info, err = b.Backup(dw, engine.BackupOptions{Files: s.opts.BackupFiles, BytesPerSecond: rate, Cancel: cancel})
			attrs = []any{"bytes", info.Bytes, "log_end", info.LogEnd, "segments", info.Segments, "files", info.Files}
		} else {
			var info cluster.BackupInfo
			info, err = s.c.Backup(dw, cluster.BackupOptions{Files: s.opts.BackupFiles, BytesPerSecond: rate, Cancel: cancel})
			attrs = []any{"bytes", info.Bytes, "shards", info.Shards, "files", info.Files}
		}
		if err == nil {
			err = w.Flush()
		}
		if err != nil {
			s.backups.failed.Add(1)
			s.log.Error("backup failed: the client got an archive without its end, which a restore refuses", "err", err,
				"request_id", reqID, "took", time.Since(start))
			return
		}
		s.backups.ok.Add(1)
		s.backups.lastOK.Store(time.Now().UnixNano())
		s.log.Info("backup sent", append(attrs, "took", time.Since(start), "request_id", reqID)...)
	})
}

// backupStats are the server's backups, for /metrics.
type backupStats struct {
	since      atomic.Int64 // the slot (one at a time): monoNow when the running one began; 0: none
	running    atomic.Bool  // set after since, cleared before it
	ok, failed atomic.Int64 // ended whole / without the end frame
	lastOK     atomic.Int64 // Unix nanoseconds of the last whole one

	mu   sync.Mutex
	stop chan struct{} // guarded by mu: the running backup's, closed by DELETE /backup; nil: none, or closed already
}

// endStop forgets stop, the backup's that ends.
func (b *backupStats) endStop(stop chan struct{}) {
	b.mu.Lock()
	if b.stop == stop {
		b.stop = nil
	}
	b.mu.Unlock()
}

// cancelBackup answers DELETE /backup: 204 once the backup running here
// was told to end (its client's archive is cut, and a restore refuses
// it), 404 BackupNotRunning when none runs here (a cluster's backup runs
// on the node its client asked).
func (s *Server) cancelBackup(ctx *fasthttp.RequestCtx, st *reqState) {
	s.backups.mu.Lock()
	stop := s.backups.stop
	s.backups.stop = nil
	s.backups.mu.Unlock()
	if stop == nil {
		s.fail(ctx, st, newAPIError(codeBackupNotRunning, "no backup runs on this node (a backup runs on the node its client asked: send this there)"))
		return
	}
	close(stop)
	s.log.Warn("backup cancelled: its client gets an archive without its end, which a restore refuses", "request_id", string(st.reqID))
	ctx.SetStatusCode(fasthttp.StatusNoContent)
}

// monoBase is monoNow's origin.
var monoBase = time.Now()

// monoNow is a monotonic clock's nanoseconds, never 0.
func monoNow() int64 { return int64(time.Since(monoBase)) + 1 }

// deadlineWriter extends the connection's write deadline before each write
// of a streamed body, and stops once the server shuts down.
type deadlineWriter struct {
	w       *bufio.Writer
	conn    interface{ SetWriteDeadline(time.Time) error }
	timeout time.Duration
	closing interface{ Load() bool }
}

var errShuttingDown = errors.New("server: shutting down")

func (dw *deadlineWriter) Write(p []byte) (int, error) {
	if dw.closing.Load() {
		return 0, errShuttingDown
	}
	if dw.conn != nil && dw.timeout > 0 {
		_ = dw.conn.SetWriteDeadline(time.Now().Add(dw.timeout))
	}
	return dw.w.Write(p)
}
