package providers

import (
	"errors"
	"fmt"
	"io"
)

// MaxListBytes bounds one answer of a provider's model-list endpoints (a
// page of its list, llama.cpp's /props, Ollama's /api/tags, /api/ps and
// /api/show): past it the read fails, so a server cannot make agentd hold
// an answer of any size.
const MaxListBytes = 32 << 20

// ErrBodyTooLarge: an answer went on past the bound LimitBody set it.
var ErrBodyTooLarge = errors.New("the answer is larger than agentd reads")

// LimitBody returns body bounded to max bytes: a read past them fails with
// ErrBodyTooLarge, naming max, rather than ending the body short (a list
// cut short would read as a shorter list, or as no list at all).
func LimitBody(body io.ReadCloser, max int64) io.ReadCloser {
	return &limitedBody{ReadCloser: body, left: max, max: max}
}

type limitedBody struct {
	io.ReadCloser
	left, max int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, b.tooLarge()
	}
	// One byte past the bound tells a longer body from one of max bytes.
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.ReadCloser.Read(p)
	if b.left -= int64(n); b.left < 0 {
		return n - 1, b.tooLarge()
	}
	return n, err
}

func (b *limitedBody) tooLarge() error {
	return fmt.Errorf("%w: more than %d bytes", ErrBodyTooLarge, b.max)
}
