package attachments

import (
	"bytes"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func testImage(w, h int) image.Image {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.Set(x, y, color.RGBA{uint8(x), uint8(y), 0x80, 0xff})
		}
	}
	return img
}

func pngBytes(t testing.TB, w, h int) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, testImage(w, h)); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestImageNoteHasDimensions(t *testing.T) {
	enc := map[string]func(*bytes.Buffer, image.Image) error{
		"png":  func(b *bytes.Buffer, m image.Image) error { return png.Encode(b, m) },
		"jpeg": func(b *bytes.Buffer, m image.Image) error { return jpeg.Encode(b, m, nil) },
		"gif":  func(b *bytes.Buffer, m image.Image) error { return gif.Encode(b, m, nil) },
	}
	for name, e := range enc {
		t.Run(name, func(t *testing.T) {
			var b bytes.Buffer
			if err := e(&b, testImage(41, 17)); err != nil {
				t.Fatal(err)
			}
			s := newStore(t, 0)
			p := filepath.Join(t.TempDir(), "pic."+name)
			os.WriteFile(p, b.Bytes(), 0o600)
			a := putFile(t, s, p)
			if a.MediaType != "image/"+name {
				t.Errorf("sniffed media type %q", a.MediaType)
			}
			if !strings.Contains(a.Note, "41x17 px") || !strings.Contains(a.Note, "image_view") {
				t.Errorf("note: %s", a.Note)
			}
			if n := noteTokens(a.Note); n > 150 {
				t.Errorf("note of about %d tokens carries more than facts: %s", n, a.Note)
			}
		})
	}
}

func TestImageViewOnlyForVision(t *testing.T) {
	if slices.Contains(ToolNames(false), ToolImageView) {
		t.Error("a model without vision is offered image_view")
	}
	if !slices.Contains(ToolNames(true), ToolImageView) {
		t.Error("a model with vision is not offered image_view")
	}
}

func TestImageViewReturnsPixels(t *testing.T) {
	s := newStore(t, 0)
	r := newRegistry(t, s)
	dir := t.TempDir()

	small := pngBytes(t, 30, 20)
	p := filepath.Join(dir, "small.png")
	os.WriteFile(p, small, 0o600)
	a := putFile(t, s, p)
	res := call(t, r, ToolImageView, map[string]any{"attachment_id": a.ID})
	if res.IsError || !res.Untrusted || len(res.Images) != 1 {
		t.Fatalf("image_view: %+v", res)
	}
	if !bytes.Equal(res.Images[0].Data, small) || res.Images[0].MediaType != "image/png" {
		t.Error("a small image should be sent exactly as stored")
	}

	// Wider than a provider takes: scaled to 1568 on the long side, keeping
	// the 3:1 aspect (1000·1568/3000 = 522 rounded down).
	p = filepath.Join(dir, "wide.png")
	os.WriteFile(p, pngBytes(t, 3000, 1000), 0o600)
	a = putFile(t, s, p)
	res = call(t, r, ToolImageView, map[string]any{"attachment_id": a.ID})
	if len(res.Images) != 1 {
		t.Fatalf("image_view: %+v", res.Text)
	}
	cfg, format, err := image.DecodeConfig(bytes.NewReader(res.Images[0].Data))
	if err != nil || format != "jpeg" || cfg.Width != 1568 || cfg.Height != 522 {
		t.Errorf("scaled image: %s %dx%d, err %v; want jpeg 1568x522", format, cfg.Width, cfg.Height, err)
	}
	if !strings.Contains(res.Text, "3000x1000") {
		t.Errorf("result should give the real size: %s", res.Text)
	}

	text := putFile(t, s, writeTemp(t, "notes.txt", "hello\n"))
	res = call(t, r, ToolImageView, map[string]any{"attachment_id": text.ID})
	if !res.IsError || len(res.Images) != 0 || !strings.Contains(res.Text, "file_read") {
		t.Errorf("image_view of a text file should point to file_read: %+v", res)
	}
}

func writeTemp(t testing.TB, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestFitSize(t *testing.T) {
	cases := map[string]struct{ w, h, wantW, wantH int }{
		"fits":      {100, 50, 100, 50},
		"wide":      {3136, 100, 1568, 50},
		"tall":      {100, 3136, 50, 1568},
		"square":    {4000, 4000, 1568, 1568},
		"thin line": {100000, 1, 1568, 1},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			if w, h := fitSize(c.w, c.h, 1568); w != c.wantW || h != c.wantH {
				t.Errorf("fitSize(%d,%d) = %d,%d, want %d,%d", c.w, c.h, w, h, c.wantW, c.wantH)
			}
		})
	}
}
