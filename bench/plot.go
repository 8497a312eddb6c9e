package bench

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"os"
	"strings"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// Series is one line of a sawtooth plot: [turn, tokens] points.
type Series struct {
	Name   string
	Color  color.RGBA
	Points [][2]int
}

// Series colours: agentd and its peers.
var (
	colorAgentd    = color.RGBA{0x1f, 0x77, 0xb4, 0xff}
	colorSummarize = color.RGBA{0xff, 0x7f, 0x0e, 0xff}
	colorTrim      = color.RGBA{0x2c, 0xa0, 0x2c, 0xff}
	colorWindow    = color.RGBA{0xd6, 0x27, 0x28, 0xff}
)

// PlotSawtooth draws request tokens per turn for each series, with the
// window as a red line, into a PNG at path.
func PlotSawtooth(path, title string, window int, series []Series) error {
	const w, h, left, right, top, bottom = 1000, 420, 70, 20, 50, 40
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	draw.Draw(img, img.Bounds(), image.White, image.Point{}, draw.Src)
	maxX, maxY := 1, window
	for _, s := range series {
		for _, p := range s.Points {
			maxX, maxY = max(maxX, p[0]), max(maxY, p[1])
		}
	}
	maxY = maxY * 21 / 20
	px := func(x int) int { return left + x*(w-left-right)/maxX }
	py := func(y int) int { return h - bottom - int(int64(y)*int64(h-top-bottom)/int64(maxY)) }
	grey := color.RGBA{0xcc, 0xcc, 0xcc, 0xff}
	black := color.RGBA{0, 0, 0, 0xff}
	for y, step := 0, niceStep(maxY); y <= maxY; y += step {
		line(img, left, py(y), w-right, py(y), grey)
		label(img, 4, py(y)+4, shortTokens(y), black)
	}
	for x, step := 0, niceStep(maxX); x <= maxX; x += step {
		label(img, px(x)-8, h-bottom+16, fmt.Sprint(x), black)
	}
	line(img, left, top, left, h-bottom, black)
	line(img, left, h-bottom, w-right, h-bottom, black)
	for x := left; x < w-right; x += 8 {
		line(img, x, py(window), min(x+4, w-right), py(window), colorWindow)
	}
	label(img, w-right-120, py(window)-4, "window "+shortTokens(window), colorWindow)
	for _, s := range series {
		for i := 1; i < len(s.Points); i++ {
			a, b := s.Points[i-1], s.Points[i]
			line(img, px(a[0]), py(a[1]), px(b[0]), py(b[1]), s.Color)
		}
	}
	label(img, left, 18, title, black)
	x := left
	for _, s := range series {
		fill(img, x, 28, x+12, 38, s.Color)
		label(img, x+16, 38, s.Name, black)
		x += 28 + 7*len(s.Name)
	}
	label(img, w/2-60, h-6, "turn (x), request tokens (y)", black)
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	if err := png.Encode(f, img); err != nil {
		_ = f.Close()
		return fmt.Errorf("plot %s: %w", path, err)
	}
	return f.Close()
}

// niceStep is a tick spacing of 1, 2 or 5 times a power of ten giving at
// most six ticks up to n.
func niceStep(n int) int {
	for p := 1; ; p *= 10 {
		for _, m := range []int{1, 2, 5} {
			if n/(m*p) <= 5 {
				return m * p
			}
		}
	}
}

// shortTokens prints 8000 as 8K, 2500 as 2.5K and 1000000 as 1M.
func shortTokens(n int) string {
	trim := func(f float64, unit string) string {
		s := strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.1f", f), "0"), ".")
		return s + unit
	}
	switch {
	case n >= 1_000_000:
		return trim(float64(n)/1e6, "M")
	case n >= 1000:
		return trim(float64(n)/1e3, "K")
	}
	return fmt.Sprint(n)
}

// line draws a segment with Bresenham's algorithm.
func line(img *image.RGBA, x0, y0, x1, y1 int, c color.RGBA) {
	dx, dy := abs(x1-x0), -abs(y1-y0)
	sx, sy := 1, 1
	if x0 > x1 {
		sx = -1
	}
	if y0 > y1 {
		sy = -1
	}
	e := dx + dy
	for {
		img.SetRGBA(x0, y0, c)
		if x0 == x1 && y0 == y1 {
			return
		}
		e2 := 2 * e
		if e2 >= dy {
			e += dy
			x0 += sx
		}
		if e2 <= dx {
			e += dx
			y0 += sy
		}
	}
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

func fill(img *image.RGBA, x0, y0, x1, y1 int, c color.RGBA) {
	draw.Draw(img, image.Rect(x0, y0, x1, y1), &image.Uniform{c}, image.Point{}, draw.Src)
}

func label(img *image.RGBA, x, y int, s string, c color.RGBA) {
	d := font.Drawer{Dst: img, Src: &image.Uniform{c}, Face: basicfont.Face7x13, Dot: fixed.P(x, y)}
	d.DrawString(s)
}
