package wal

// stats.go owns the cumulative counters behind Log.Stats. Every counter is
// an atomic written by its one owner (appenders, the writer, readers) and
// read without a lock; a Stats value is therefore not an atomic snapshot
// across counters, which is fine for metrics.

import (
	"math"
	"sync/atomic"
	"time"
)

// Histogram is a fixed-bucket histogram in the Prometheus style: Counts[i]
// counts observations <= Bounds[i] (and > Bounds[i-1]); the last bucket has
// Bound +Inf. Counts are per bucket, not cumulative.
type Histogram struct {
	Bounds []float64 // upper bounds; the last is math.Inf(1)
	Counts []uint64
	Count  uint64  // number of observations
	Sum    float64 // sum of the observations
}

// Add adds o's observations to h. The bounds must be the same; an empty h
// takes o's.
func (h *Histogram) Add(o Histogram) {
	if h.Bounds == nil {
		h.Bounds, h.Counts = o.Bounds, make([]uint64, len(o.Counts))
	}
	for j := range min(len(h.Counts), len(o.Counts)) {
		h.Counts[j] += o.Counts[j]
	}
	h.Count += o.Count
	h.Sum += o.Sum
}

// Stats are cumulative counters since Open.
type Stats struct {
	Records           uint64 // records appended
	PayloadBytes      uint64 // payload bytes appended, before compression
	Bytes             uint64 // framed bytes appended (what reaches the files)
	CompressedRecords uint64 // records stored compressed
	Writes            uint64 // write batches (writer iterations that wrote)
	WriteCalls        uint64 // WriteAt calls
	Fsyncs            uint64 // fdatasync calls on segment files
	Rolls             uint64 // segment rolls
	AppendStalls      uint64 // Appends that waited for room in the ring
	RingReads         uint64 // ReadAt calls served from the ring
	FileReads         uint64 // ReadAt calls and ReadRun reads served from a file
	// ReaderRingReads counts the Reader's reads served from the ring
	// (fillFromRing), ReaderFileReads those from a file.
	ReaderRingReads, ReaderFileReads uint64
	SpareFailures                    uint64 // failed attempts to prepare a segment file (retried)
	RollStalls                       uint64 // times a roll found no segment file and appends waited
	StickyFailures                   uint64 // write or fsync failures that failed the log (0 or 1)
	// FsyncSeconds is the latency of each fdatasync, in seconds.
	FsyncSeconds Histogram
	// BatchRecords is the number of records per write batch.
	BatchRecords Histogram
}

// fsyncBounds are the fsync latency buckets in seconds; part of the metrics
// contract (dashboards), change with care.
func fsyncBounds() []float64 {
	return []float64{50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3, 100e-3, 250e-3, 1}
}

// batchBounds are the records-per-write buckets.
func batchBounds() []float64 {
	return []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096}
}

// histogram is the lock-free recording side of a Histogram with at most 16
// finite bounds.
type histogram struct {
	bounds []float64
	counts [17]atomic.Uint64
	count  atomic.Uint64
	sum    atomic.Uint64 // sum of observations, stored as round(v*scale)
	scale  float64       // 1e9 for seconds (nanosecond resolution), 1 for counts
}

// observe adds v to its bucket: the first whose bound is >= v, else +Inf.
func (h *histogram) observe(v float64) {
	i := 0
	for i < len(h.bounds) && v > h.bounds[i] {
		i++
	}
	h.counts[i].Add(1)
	h.count.Add(1)
	h.sum.Add(uint64(v*h.scale + 0.5))
}

// snapshot copies the counters; concurrent observations may be half in.
func (h *histogram) snapshot() Histogram {
	out := Histogram{
		Bounds: make([]float64, len(h.bounds)+1),
		Counts: make([]uint64, len(h.bounds)+1),
		Count:  h.count.Load(),
		Sum:    float64(h.sum.Load()) / h.scale,
	}
	copy(out.Bounds, h.bounds)
	out.Bounds[len(h.bounds)] = math.Inf(1)
	for i := range out.Counts {
		out.Counts[i] = h.counts[i].Load()
	}
	return out
}

// counters are the live counters of a Log.
type counters struct {
	records, payloadBytes, bytes, compressed  atomic.Uint64
	writes, writeCalls, fsyncs, rolls         atomic.Uint64
	stalls, ringReads, fileReads              atomic.Uint64
	readerRing, readerFile                    atomic.Uint64
	spareFailures, rollStalls, stickyFailures atomic.Uint64
	fsyncLat                                  histogram
	batch                                     histogram
}

func (c *counters) init() {
	c.fsyncLat.bounds, c.fsyncLat.scale = fsyncBounds(), 1e9
	c.batch.bounds, c.batch.scale = batchBounds(), 1
}

func (c *counters) observeFsync(d time.Duration) {
	c.fsyncs.Add(1)
	c.fsyncLat.observe(d.Seconds())
}

// Stats returns the cumulative counters.
func (l *Log) Stats() Stats {
	c := &l.stats
	return Stats{
		Records:           c.records.Load(),
		PayloadBytes:      c.payloadBytes.Load(),
		Bytes:             c.bytes.Load(),
		CompressedRecords: c.compressed.Load(),
		Writes:            c.writes.Load(),
		WriteCalls:        c.writeCalls.Load(),
		Fsyncs:            c.fsyncs.Load(),
		Rolls:             c.rolls.Load(),
		AppendStalls:      c.stalls.Load(),
		RingReads:         c.ringReads.Load(),
		FileReads:         c.fileReads.Load(),
		ReaderRingReads:   c.readerRing.Load(),
		ReaderFileReads:   c.readerFile.Load(),
		SpareFailures:     c.spareFailures.Load(),
		RollStalls:        c.rollStalls.Load(),
		StickyFailures:    c.stickyFailures.Load(),
		FsyncSeconds:      c.fsyncLat.snapshot(),
		BatchRecords:      c.batch.snapshot(),
	}
}
