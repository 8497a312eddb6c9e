package openai

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"sync"

	"github.com/openai/openai-go/v3/packages/ssestream"
)

// sseLineBufs are the line buffers of answers' SSE decoders, as large as
// bufio.Scanner's first: each is held by one decoder until it closes.
var sseLineBufs = sync.Pool{New: func() any { b := make([]byte, 4096); return &b }}

// sseDecoder reads a text/event-stream body as the SDK's decoder
// (ssestream.NewDecoder) does: the same scanner, limits, fields and events
// (TestSSEDecoderReadsAsTheSDKs). Its line buffer is pooled and its event
// data reused from one event to the next, where the SDK's allocated a 4 KB
// line buffer per answer and a new slice per event (5% of the bytes a turn
// allocated at 10,000 chats). An event's Data is valid until the next call
// of Next; chunkStream decodes it at once (decodeChunk copies what it
// keeps).
type sseDecoder struct {
	rc   io.ReadCloser
	scn  *bufio.Scanner
	line *[]byte // nil once closed
	data []byte
	evt  ssestream.Event
	err  error
}

// newSSEDecoder reads res's body; nil without one, as the SDK's.
func newSSEDecoder(res *http.Response) *sseDecoder {
	if res == nil || res.Body == nil {
		return nil
	}
	line := sseLineBufs.Get().(*[]byte)
	scn := bufio.NewScanner(res.Body)
	scn.Buffer(*line, bufio.MaxScanTokenSize<<9)
	return &sseDecoder{rc: res.Body, scn: scn, line: line}
}

func (s *sseDecoder) Next() bool {
	if s.err != nil || s.line == nil {
		return false
	}
	event := ""
	s.data = s.data[:0]
	for s.scn.Scan() {
		txt := s.scn.Bytes()
		if len(txt) == 0 { // an empty line ends an event
			if len(s.data) == 0 {
				event = ""
				continue
			}
			s.evt = ssestream.Event{Type: event, Data: s.data}
			return true
		}
		name, value, _ := bytes.Cut(txt, []byte(":"))
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
		switch string(name) {
		case "event":
			event = string(value)
		case "data":
			s.data = append(append(s.data, value...), '\n')
		}
	}
	s.err = s.scn.Err()
	return false
}

func (s *sseDecoder) Event() ssestream.Event { return s.evt }

func (s *sseDecoder) Err() error { return s.err }

// Close closes the body and gives the line buffer back: nothing reads it
// after (Next reads nothing once closed).
func (s *sseDecoder) Close() error {
	if s.line != nil {
		sseLineBufs.Put(s.line)
		s.line, s.scn = nil, nil
	}
	return s.rc.Close()
}
