// Package reportcheck opens a rendered report in headless Chromium, as a
// reader would, and says what the page holds: the findings and their
// verdicts, the sections, and for every figure how much it draws and
// whether it can be read: no text cut off or on other text, no two series
// alike. Tests
// use it to check the report's structure at desktop and laptop widths,
// and keep full-page screenshots for a person to look at.
package reportcheck

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/doxlab/doxlab/browser"
)

// Page is a rendered report as the browser laid it out at one width.
type Page struct {
	Width    int
	Findings []string // each finding's verdict, in order
	Sections []string // the sections' anchors, in order
	Figures  []Figure
	Overflow bool   // wider than the window: the reader must scroll sideways
	Shot     string // the full-page screenshot
}

// Figure is one figure as drawn.
type Figure struct {
	ID     string  `json:"id"`
	Marks  int     `json:"marks"` // SVG shapes: lines, bars, glyphs, cells
	Width  float64 `json:"width"` // as laid out, in CSS pixels
	Height float64 `json:"height"`
	NoData bool    `json:"noData"` // a panel says "(no data)"
	CSV    bool    `json:"csv"`    // links its data
	// Legible is what makes it hard to read, as laid out: text leaving
	// the figure or overlapping other text, series that look alike.
	Legible Legibility `json:"legible"`
}

const inspect = `(() => { const legible = ` + legible + `; return {
  findings: [...document.querySelectorAll('#findings tr.finding td.verdict')].map(e => e.textContent.trim()),
  sections: [...document.querySelectorAll('main section')].map(e => e.id),
  figures: [...document.querySelectorAll('.fig')].map(f => {
    const s = f.querySelector('svg');
    const r = s ? s.getBoundingClientRect() : {width: 0, height: 0};
    return {id: f.id, marks: s ? s.querySelectorAll('path,rect,circle,polygon,polyline,line').length : 0,
      width: r.width, height: r.height, noData: f.textContent.includes('(no data)'),
      csv: !!f.querySelector('a[href$=".csv"]'), legible: s ? legible(s) : {problems: ['no figure']}};
  }),
  overflow: document.documentElement.scrollWidth > window.innerWidth + 1,
}})()`

// Open loads html (a report.html) in headless Chromium at each width and
// saves a full-page PNG screenshot of each into dir.
func Open(ctx context.Context, html, dir string, widths ...int) ([]Page, error) {
	abs, err := filepath.Abs(html)
	if err != nil {
		return nil, err
	}
	b, err := browser.Launch(ctx, browser.Options{})
	if err != nil {
		return nil, err
	}
	defer b.Close()
	var pages []Page
	for _, w := range widths {
		type inspected struct {
			Findings []string `json:"findings"`
			Sections []string `json:"sections"`
			Figures  []Figure `json:"figures"`
			Overflow bool     `json:"overflow"`
		}
		if err := b.Do(ctx, time.Minute, chromedp.EmulateViewport(int64(w), 900), chromedp.Navigate("file://"+abs)); err != nil {
			return nil, fmt.Errorf("rendering %s at %d px: %w", html, w, err)
		}
		raw, err := browser.Get(ctx, b, time.Minute, chromedp.Evaluate[inspected](inspect))
		if err != nil {
			return nil, fmt.Errorf("inspecting %s: %w", html, err)
		}
		shot, err := browser.Get(ctx, b, time.Minute, chromedp.FullScreenshot(100)) // 100: PNG
		if err != nil {
			return nil, fmt.Errorf("screenshot of %s: %w", html, err)
		}
		p := Page{Width: w, Findings: raw.Findings, Sections: raw.Sections, Figures: raw.Figures, Overflow: raw.Overflow,
			Shot: filepath.Join(dir, fmt.Sprintf("report-%dpx.png", w))}
		if err := os.WriteFile(p.Shot, shot, 0o644); err != nil {
			return nil, err
		}
		pages = append(pages, p)
	}
	return pages, nil
}
