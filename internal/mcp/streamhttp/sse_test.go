package streamhttp

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

func TestReadSSE(t *testing.T) {
	stream := ": keep-alive comment\r\n" +
		"retry: 1500\n" +
		"id: 1\nevent: message\ndata: {\"a\":\ndata: 1}\n\n" + // two data lines join with \n
		"id: 2\ndata:\n\n" + // priming event: id only, empty data, not dispatched
		"event: other\ndata: ignored-by-caller\n\n" +
		"data: no-id\n\n"
	var cur sseCursor
	var got []string
	err := readSSE(strings.NewReader(stream), 1<<20, &cur, func(ev sseEvent) (bool, error) {
		got = append(got, ev.name+"|"+string(ev.data))
		return false, nil
	})
	if !errors.Is(err, io.EOF) {
		t.Fatalf("err %v, want io.EOF for a stream the server ended", err)
	}
	want := []string{"message|{\"a\":\n1}", "other|ignored-by-caller", "|no-id"}
	if strings.Join(got, ";") != strings.Join(want, ";") {
		t.Errorf("events %q, want %q", got, want)
	}
	if string(cur.lastID) != "2" || !cur.hasRetry || cur.retry != 1500*time.Millisecond {
		t.Errorf("cursor %+v, want last id 2 and retry 1.5s", cur)
	}
}

func TestReadSSEBrokenMidEventKeepsTheLastWholeID(t *testing.T) {
	var cur sseCursor
	n := 0
	err := readSSE(strings.NewReader("id: a\ndata: x\n\nid: b\ndata: {\"half"), 1<<20, &cur, func(sseEvent) (bool, error) {
		n++
		return false, nil
	})
	if !errors.Is(err, io.ErrUnexpectedEOF) || string(cur.lastID) != "a" || n != 1 {
		t.Errorf("err %v, last id %q, %d events; want ErrUnexpectedEOF, a, 1", err, cur.lastID, n)
	}
}

func TestReadSSEBoundsEventSize(t *testing.T) {
	var cur sseCursor
	err := readSSE(strings.NewReader("data: "+strings.Repeat("x", 100)+"\n\n"), 50, &cur, func(sseEvent) (bool, error) { return false, nil })
	if err == nil || !strings.Contains(err.Error(), "maxMessageBytes") {
		t.Errorf("err %v, want the bound named", err)
	}
	err = readSSE(strings.NewReader(strings.Repeat("data: xxxxxxxxxx\n", 20)+"\n"), 50, &cur, func(sseEvent) (bool, error) { return false, nil })
	if err == nil || !strings.Contains(err.Error(), "maxMessageBytes") {
		t.Errorf("many data lines: err %v, want the bound named", err)
	}
}

// A line longer than the reader's buffer is put together from its pieces,
// and the reader goes on with the next event as before.
func TestReadSSELineLongerThanTheBuffer(t *testing.T) {
	long := strings.Repeat("y", 3*sseBufferSize+17)
	var cur sseCursor
	var got []string
	err := readSSE(strings.NewReader("id: 7\r\ndata: "+long+"\r\n\r\ndata: short\n\n"), 1<<20, &cur, func(ev sseEvent) (bool, error) {
		got = append(got, string(ev.data))
		return false, nil
	})
	if !errors.Is(err, io.EOF) || len(got) != 2 || got[0] != long || got[1] != "short" || string(cur.lastID) != "7" {
		t.Errorf("err %v, %d events (first %d bytes, want %d), last id %q", err, len(got), len(got[0]), len(long), cur.lastID)
	}
}

// The reader's buffers are pooled: a stream that broke off mid-event leaves
// nothing of that event to the next stream read.
func TestReadSSEStartsEachStreamClean(t *testing.T) {
	var cur sseCursor
	err := readSSE(strings.NewReader("event: other\nid: a\ndata: half\ndata: cut"), 1<<20, &cur, func(sseEvent) (bool, error) { return false, nil })
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("err %v, want ErrUnexpectedEOF", err)
	}
	var got []string
	err = readSSE(strings.NewReader("data: b\n\n"), 1<<20, &cur, func(ev sseEvent) (bool, error) {
		got = append(got, ev.name+"|"+string(ev.data))
		return true, nil
	})
	if err != nil || len(got) != 1 || got[0] != "|b" || len(cur.lastID) != 0 {
		t.Errorf("err %v, events %q, last id %q; want one event \"|b\" and no id", err, got, cur.lastID)
	}
}

// A stream whose end is read with its last event (the transport's body
// says io.EOF with the event's bytes when the stream's last chunk was
// already there) is known to have ended: its connection needs no drain.
func TestReadSSEEndedWithTheLastEvent(t *testing.T) {
	for _, c := range []struct {
		name  string
		body  io.Reader
		ended bool
	}{
		{"end read with the event", iotest.DataErrReader(strings.NewReader("data: x\n\n")), true},
		{"end not read yet", strings.NewReader("data: x\n\n"), false},
		{"more after the event", iotest.DataErrReader(strings.NewReader("data: x\n\n: more\n\n")), true},
	} {
		cur := sseCursor{ended: !c.ended}
		err := readSSE(c.body, 1<<20, &cur, func(sseEvent) (bool, error) { return true, nil })
		if err != nil || cur.ended != c.ended {
			t.Errorf("%s: err %v, ended %v; want ended %v", c.name, err, cur.ended, c.ended)
		}
	}
}
