package kubernetes

import (
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/nodeplane/nodeplane/clock"
)

// An answer to a request sent before the server was found lost (one in
// flight when it went, answered after the loss was recorded) is no sign
// of the server being back: it once restarted the informers while the
// server was still down. An answer to a request sent after the loss is.
func TestAnswerSentBeforeTheLossIsNoSignOfTheServer(t *testing.T) {
	fc := clock.NewFake(time.Unix(1000, 0))
	c := newConnection(fc, slog.New(slog.DiscardHandler))
	c.set(true, true)
	sentBefore := fc.Now()
	fc.Advance(time.Second)
	c.lost(errors.New("connection refused"))
	c.answered("the nodes informer", sentBefore)
	if ok, _ := c.Connected(); ok {
		t.Fatal("connected again by an answer to a request sent before the loss")
	}
	select {
	case <-c.back:
		t.Fatal("back signalled")
	default:
	}
	fc.Advance(time.Second)
	c.answered("probe", fc.Now())
	if ok, _ := c.Connected(); !ok {
		t.Fatal("an answer to a request sent after the loss does not say the server is back")
	}
}
