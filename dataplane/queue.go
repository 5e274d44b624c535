package dataplane

import (
	"context"
	"sync"
)

// queue is the loop's bounded FIFO input. Ordinary pushes wait while limit
// messages are queued; the in-sync markers bypass the limit so that the
// marker methods never block and still keep their place in the order.
type queue struct {
	mu      sync.Mutex
	buf     []any // ring storage
	head    int   // index of the oldest message
	n       int   // messages queued
	limit   int
	stopped bool

	ready   chan struct{} // holds a token while messages are queued
	space   chan struct{} // closed (and replaced) when room is made
	waiting bool          // a sender waits on space
	done    chan struct{} // closed by stop
}

func newQueue(limit int) *queue {
	return &queue{
		buf:   make([]any, limit+2), // room for the two markers
		limit: limit,
		ready: make(chan struct{}, 1),
		space: make(chan struct{}),
		done:  make(chan struct{}),
	}
}

// tryPush appends msg unless the queue is full (force ignores the limit) or
// stopped. It returns the channel to wait on when full.
func (q *queue) tryPush(msg any, force bool) (wait <-chan struct{}, err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.stopped {
		return nil, ErrStopped
	}
	if !force && q.n >= q.limit {
		q.waiting = true
		return q.space, ErrQueueFull
	}
	if q.n == len(q.buf) {
		q.grow()
	}
	q.buf[(q.head+q.n)%len(q.buf)] = msg
	q.n++
	if q.n == 1 {
		q.signal()
	}
	return nil, nil
}

// push appends msg, waiting for room while the queue is full.
func (q *queue) push(ctx context.Context, msg any) error {
	for {
		wait, err := q.tryPush(msg, false)
		if err != ErrQueueFull {
			return err
		}
		select {
		case <-wait:
		case <-q.done:
			return ErrStopped
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// drain moves up to max messages, oldest first, into out[:0] and returns it.
func (q *queue) drain(out []any, max int) []any {
	out = out[:0]
	q.mu.Lock()
	defer q.mu.Unlock()
	k := min(q.n, max)
	for i := 0; i < k; i++ {
		j := (q.head + i) % len(q.buf)
		out = append(out, q.buf[j])
		q.buf[j] = nil
	}
	q.head = (q.head + k) % len(q.buf)
	q.n -= k
	if q.n > 0 {
		q.signal() // more to take on the next turn
	}
	if k > 0 && q.waiting {
		close(q.space)
		q.space = make(chan struct{})
		q.waiting = false
	}
	return out
}

// stop refuses further pushes, wakes blocked senders and drops what is left.
func (q *queue) stop() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.stopped {
		return
	}
	q.stopped = true
	close(q.done)
	clear(q.buf)
	q.n = 0
}

// len reports how many messages are queued.
func (q *queue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.n
}

func (q *queue) signal() {
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

func (q *queue) grow() {
	nb := make([]any, 2*len(q.buf)+1)
	for i := 0; i < q.n; i++ {
		nb[i] = q.buf[(q.head+i)%len(q.buf)]
	}
	q.buf, q.head = nb, 0
}
