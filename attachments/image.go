package attachments

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"io"
	"os"

	// Decoders for the image kinds; see kindOf.
	_ "image/gif"
	_ "image/png"

	"golang.org/x/image/draw"
	_ "golang.org/x/image/webp"

	"github.com/agentd/agentd/chat"
)

// What image_view sends as is. Providers refuse or shrink pictures past a
// few megabytes or about 1,600 pixels a side, so a bigger picture is scaled
// down to fit before it is sent; the stored file is never changed.
const (
	viewMaxSide  = 1568
	viewMaxBytes = 3_750_000
	// decodeMaxPixels bounds the memory one decode may take (4 bytes a
	// pixel); it limits what image_view can scale, not what can be stored.
	decodeMaxPixels = 100_000_000
)

// imageSize reads an image's dimensions from its header.
func imageSize(path string) (int, int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	cfg, _, err := image.DecodeConfig(f)
	if err != nil {
		return 0, 0, err
	}
	return cfg.Width, cfg.Height, nil
}

// viewImage returns the picture to show a model: the stored bytes when they
// are small enough, else a scaled-down JPEG.
func viewImage(f *os.File, facts Facts) (chat.Image, string, error) {
	fits := facts.Width <= viewMaxSide && facts.Height <= viewMaxSide && facts.Size <= viewMaxBytes
	if fits {
		data, err := io.ReadAll(f)
		if err != nil {
			return chat.Image{}, "", err
		}
		return chat.Image{MediaType: baseType(facts.MediaType), Data: data},
			fmt.Sprintf("Image %dx%d, shown as stored.", facts.Width, facts.Height), nil
	}
	if int64(facts.Width)*int64(facts.Height) > decodeMaxPixels {
		return chat.Image{}, "", fmt.Errorf("image of %dx%d pixels is too large to scale for viewing", facts.Width, facts.Height)
	}
	src, _, err := image.Decode(f)
	if err != nil {
		return chat.Image{}, "", err
	}
	w, h := fitSize(facts.Width, facts.Height, viewMaxSide)
	dst := image.NewRGBA(image.Rect(0, 0, w, h))
	// White under transparent parts: JPEG has no alpha.
	draw.Draw(dst, dst.Bounds(), &image.Uniform{C: color.White}, image.Point{}, draw.Src)
	draw.ApproxBiLinear.Scale(dst, dst.Bounds(), src, src.Bounds(), draw.Over, nil)
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, dst, &jpeg.Options{Quality: 85}); err != nil {
		return chat.Image{}, "", err
	}
	return chat.Image{MediaType: "image/jpeg", Data: buf.Bytes()},
		fmt.Sprintf("Image %dx%d, shown scaled to %dx%d.", facts.Width, facts.Height, w, h), nil
}

// fitSize scales w×h so that neither side passes side, keeping the aspect.
func fitSize(w, h, side int) (int, int) {
	if w <= side && h <= side {
		return w, h
	}
	if w >= h {
		return side, max(1, h*side/w)
	}
	return max(1, w*side/h), side
}
