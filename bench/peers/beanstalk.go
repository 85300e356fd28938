package peers

// The beanstalkd peer, through a minimal client of its text protocol
// (protocol.txt of beanstalkd 1.x): put, reserve-with-timeout, delete,
// use, watch, ignore and stats-tube. A batch is pipelined: all its
// commands are written at once and the replies read in order, so a batch
// costs one round trip like one MNS batch request. A batch receive is one
// reserve-with-timeout <wait> followed by max-1 pipelined
// reserve-with-timeout 0 (whatever is ready at once).
//
// Priority maps to beanstalkd's pri (0 most urgent, like MNS 1 highest);
// DelaySeconds to delay; the visibility timeout to ttr.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/smqd/smqd/bench"
)

// BeanstalkTarget drives beanstalkd; queues are tubes.
type BeanstalkTarget struct {
	addr  string
	ttr   int
	tubes []string
}

// NewBeanstalkTarget returns a target for beanstalkd at addr. ttr is the
// time a reserved job may stay reserved (the visibility timeout).
func NewBeanstalkTarget(addr string, ttr time.Duration) *BeanstalkTarget {
	s := int(ttr / time.Second)
	if s < 1 {
		s = 30
	}
	return &BeanstalkTarget{addr: addr, ttr: s}
}

// Beanstalkd describes the beanstalkd peer; the visibility timeout is
// its ttr.
func (catalog) Beanstalkd() bench.Peer {
	return bench.Peer{Name: "beanstalkd", DefaultAddr: "127.0.0.1:11300", New: func(o bench.PeerOptions) (bench.Target, error) {
		return NewBeanstalkTarget(o.Addr, o.VisibilityTimeout), nil
	}}
}

// Name returns "beanstalkd".
func (t *BeanstalkTarget) Name() string { return "beanstalkd" }

// Prepare names the tubes. Tubes exist implicitly; fresh runs get names
// unique to the run (a tube cannot be deleted).
func (t *BeanstalkTarget) Prepare(ctx context.Context, names []string, fresh bool) error {
	suffix := ""
	if fresh {
		suffix = "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	}
	t.tubes = t.tubes[:0]
	for _, n := range names {
		t.tubes = append(t.tubes, n+suffix)
	}
	c, err := t.dial()
	if err != nil {
		return err
	}
	return c.Close()
}

func (t *BeanstalkTarget) dial() (*bsClient, error) {
	conn, err := net.DialTimeout("tcp", t.addr, 5*time.Second)
	if err != nil {
		return nil, fmt.Errorf("beanstalkd: %w", err)
	}
	return &bsClient{t: t, conn: conn, r: bufio.NewReaderSize(conn, 64<<10), w: bufio.NewWriterSize(conn, 64<<10), used: -1, watched: -1}, nil
}

// Backlog returns ready + reserved + delayed + buried jobs of the tube.
func (t *BeanstalkTarget) Backlog(ctx context.Context, i int) (int64, error) {
	c, err := t.dial()
	if err != nil {
		return 0, err
	}
	defer c.Close()
	fmt.Fprintf(c.w, "stats-tube %s\r\n", t.tubes[i])
	if err := c.w.Flush(); err != nil {
		return 0, err
	}
	line, err := c.line()
	if err != nil {
		return 0, err
	}
	if string(line) == "NOT_FOUND" {
		return 0, nil // no job and nobody using it
	}
	n, ok := strings.CutPrefix(string(line), "OK ")
	if !ok {
		return 0, fmt.Errorf("beanstalkd stats-tube: %q", line)
	}
	size, _ := strconv.Atoi(n)
	data, err := c.data(size)
	if err != nil {
		return 0, err
	}
	var sum int64
	for _, l := range strings.Split(string(data), "\n") {
		k, v, _ := strings.Cut(l, ":")
		switch k {
		case "current-jobs-ready", "current-jobs-reserved", "current-jobs-delayed", "current-jobs-buried":
			x, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			sum += x
		}
	}
	return sum, nil
}

// Close does nothing (connections belong to the clients).
func (t *BeanstalkTarget) Close() error { return nil }

// NewClient dials one connection.
func (t *BeanstalkTarget) NewClient(ctx context.Context) (bench.Client, error) { return t.dial() }

// bsClient is one beanstalkd connection. Owned by one goroutine.
type bsClient struct {
	t       *BeanstalkTarget
	conn    net.Conn
	r       *bufio.Reader
	w       *bufio.Writer
	used    int // tube of "use", -1 none
	watched int // tube watched (default ignored), -1 none
	pending []uint64
	num     []byte
}

func (c *bsClient) Close() error { return c.conn.Close() }

// line reads one reply line without its CRLF (valid until the next read).
func (c *bsClient) line() ([]byte, error) {
	l, err := c.r.ReadSlice('\n')
	if err != nil {
		return nil, fmt.Errorf("beanstalkd: %w", err)
	}
	return bytes.TrimRight(l, "\r\n"), nil
}

// data reads a body of n bytes and its CRLF (valid until the next read).
func (c *bsClient) data(n int) ([]byte, error) {
	b, err := c.r.Peek(n + 2)
	if err != nil {
		if errors.Is(err, bufio.ErrBufferFull) {
			buf := make([]byte, n+2)
			if _, err := ioReadFull(c.r, buf); err != nil {
				return nil, err
			}
			return buf[:n], nil
		}
		return nil, fmt.Errorf("beanstalkd: %w", err)
	}
	c.r.Discard(n + 2)
	return b[:n], nil
}

func ioReadFull(r *bufio.Reader, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := r.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

func (c *bsClient) expect(want string) error {
	l, err := c.line()
	if err != nil {
		return err
	}
	if !bytes.HasPrefix(l, []byte(want)) {
		return fmt.Errorf("beanstalkd: want %s, got %q", want, l)
	}
	return nil
}

func (c *bsClient) Send(ctx context.Context, i int, msgs []bench.Outgoing) (int, error) {
	if c.used != i {
		c.w.WriteString("use " + c.t.tubes[i] + "\r\n")
		c.w.Flush()
		if err := c.expect("USING"); err != nil {
			return 0, err
		}
		c.used = i
	}
	for k := range msgs {
		m := &msgs[k]
		pri := m.Priority
		if pri == 0 {
			pri = 8
		}
		c.num = append(c.num[:0], "put "...)
		c.num = strconv.AppendInt(c.num, int64(pri), 10)
		c.num = append(c.num, ' ')
		c.num = strconv.AppendInt(c.num, int64(m.Delay), 10)
		c.num = append(c.num, ' ')
		c.num = strconv.AppendInt(c.num, int64(c.t.ttr), 10)
		c.num = append(c.num, ' ')
		c.num = strconv.AppendInt(c.num, int64(len(m.Body)), 10)
		c.num = append(c.num, "\r\n"...)
		c.w.Write(c.num)
		c.w.Write(m.Body)
		c.w.WriteString("\r\n")
	}
	if err := c.w.Flush(); err != nil {
		return 0, fmt.Errorf("beanstalkd: %w", err)
	}
	ok := 0
	var first error
	for range msgs {
		if err := c.expect("INSERTED"); err != nil {
			if first == nil {
				first = err
			}
			continue
		}
		ok++
	}
	return ok, first
}

func (c *bsClient) Receive(ctx context.Context, i int, max int, wait time.Duration, fn func(body []byte)) (int, error) {
	if c.watched != i {
		if len(c.pending) > 0 {
			return 0, errors.New("bench: receive from another tube with deletes pending")
		}
		c.w.WriteString("watch " + c.t.tubes[i] + "\r\n")
		if c.watched == -1 {
			c.w.WriteString("ignore default\r\n")
		} else {
			c.w.WriteString("ignore " + c.t.tubes[c.watched] + "\r\n")
		}
		c.w.Flush()
		if err := c.expect("WATCHING"); err != nil {
			return 0, err
		}
		if err := c.expect("WATCHING"); err != nil {
			return 0, err
		}
		c.watched = i
	}
	ws := int64((wait + time.Second - 1) / time.Second)
	c.num = append(c.num[:0], "reserve-with-timeout "...)
	c.num = strconv.AppendInt(c.num, ws, 10)
	c.num = append(c.num, "\r\n"...)
	c.w.Write(c.num)
	if err := c.w.Flush(); err != nil {
		return 0, fmt.Errorf("beanstalkd: %w", err)
	}
	n, err := c.reserved(fn)
	if err != nil || n == 0 || max == 1 {
		return n, err
	}
	for k := 1; k < max; k++ {
		c.w.WriteString("reserve-with-timeout 0\r\n")
	}
	if err := c.w.Flush(); err != nil {
		return n, fmt.Errorf("beanstalkd: %w", err)
	}
	var first error
	for k := 1; k < max; k++ {
		m, err := c.reserved(fn)
		n += m
		if err != nil && first == nil {
			first = err
		}
	}
	return n, first
}

// reserved reads one reserve reply: 1 for a job, 0 for TIMED_OUT.
func (c *bsClient) reserved(fn func([]byte)) (int, error) {
	l, err := c.line()
	if err != nil {
		return 0, err
	}
	rest, ok := bytes.CutPrefix(l, []byte("RESERVED "))
	if !ok {
		if string(l) == "TIMED_OUT" || string(l) == "DEADLINE_SOON" {
			return 0, nil
		}
		return 0, fmt.Errorf("beanstalkd reserve: %q", l)
	}
	idb, sizeb, _ := bytes.Cut(rest, []byte(" "))
	id, err1 := strconv.ParseUint(string(idb), 10, 64)
	size, err2 := strconv.Atoi(string(sizeb))
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("beanstalkd reserve: %q", l)
	}
	body, err := c.data(size)
	if err != nil {
		return 0, err
	}
	c.pending = append(c.pending, id)
	if fn != nil {
		fn(body)
	}
	return 1, nil
}

func (c *bsClient) Pending() int { return len(c.pending) }

func (c *bsClient) Delete(ctx context.Context, n int) (int, error) {
	if n > len(c.pending) {
		n = len(c.pending)
	}
	for _, id := range c.pending[:n] {
		c.num = append(c.num[:0], "delete "...)
		c.num = strconv.AppendUint(c.num, id, 10)
		c.num = append(c.num, "\r\n"...)
		c.w.Write(c.num)
	}
	rest := copy(c.pending, c.pending[n:])
	c.pending = c.pending[:rest]
	if err := c.w.Flush(); err != nil {
		return 0, fmt.Errorf("beanstalkd: %w", err)
	}
	ok := 0
	var first error
	for k := 0; k < n; k++ {
		if err := c.expect("DELETED"); err != nil {
			if first == nil {
				first = err
			}
			continue
		}
		ok++
	}
	return ok, first
}
