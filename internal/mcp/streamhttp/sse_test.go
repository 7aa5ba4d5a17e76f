package streamhttp

import (
	"errors"
	"io"
	"strings"
	"testing"
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
	if cur.lastID != "2" || !cur.hasRetry || cur.retry != 1500*time.Millisecond {
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
	if !errors.Is(err, io.ErrUnexpectedEOF) || cur.lastID != "a" || n != 1 {
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
