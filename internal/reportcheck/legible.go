package reportcheck

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/doxlab/doxlab/browser"
)

// legible is a JavaScript function of an <svg> element that returns what
// makes the figure hard to read, as Chromium laid it out:
//   - text that leaves the figure (its box past the SVG's by > 1 px);
//   - two texts that overlap: their boxes intersect once each is trimmed
//     to the middle 60 % of its height (its width, turned upright) and
//     by 0.5 px along it, since a font's box reaches past its ink, and a
//     legend's rows or a wrapped label's lines sit closer than that;
//   - two legend entries with different labels whose lines share both
//     colour and dash pattern. A legend entry is a text beside a short
//     horizontal stroked segment (10-30 user units long) at its height.
const legible = `(svg) => {
  const box = svg.getBoundingClientRect();
  const texts = [...svg.querySelectorAll('text')].filter(t => t.textContent.trim() !== '').map(t => {
    const r = t.getBoundingClientRect(), m = t.getScreenCTM();
    return {s: t.textContent.trim(), l: r.left, r: r.right, t: r.top, b: r.bottom, up: Math.abs(m.b) > Math.abs(m.a)};
  });
  const problems = [];
  for (const x of texts) {
    if (x.l < box.left - 1 || x.r > box.right + 1 || x.t < box.top - 1 || x.b > box.bottom + 1) {
      problems.push('text "' + x.s + '" leaves the figure');
    }
  }
  const trim = x => {
    if (x.up) {const w = x.r - x.l; return {l: x.l + 0.2 * w, r: x.r - 0.2 * w, t: x.t + 0.5, b: x.b - 0.5};}
    const h = x.b - x.t; return {l: x.l + 0.5, r: x.r - 0.5, t: x.t + 0.2 * h, b: x.b - 0.2 * h};
  };
  for (let i = 0; i < texts.length; i++) {
    const a = trim(texts[i]);
    for (let j = i + 1; j < texts.length; j++) {
      const b = trim(texts[j]);
      if (a.l < b.r && b.l < a.r && a.t < b.b && b.t < a.b) {
        problems.push('text "' + texts[i].s + '" overlaps "' + texts[j].s + '"');
      }
    }
  }
  const entries = [];
  for (const p of svg.querySelectorAll('path')) {
    const m = /^M([-\d.e]+),([-\d.e]+)L([-\d.e]+),([-\d.e]+)$/.exec((p.getAttribute('d') || '').replace(/\s/g, ''));
    if (!m || m[2] !== m[4]) continue;
    const len = Math.abs(parseFloat(m[3]) - parseFloat(m[1]));
    if (len < 10 || len > 30) continue;
    const st = p.style;
    if (!st.stroke || st.stroke === 'none') continue;
    const r = p.getBoundingClientRect();
    const y = (r.top + r.bottom) / 2;
    const label = texts.find(x => y > x.t && y < x.b && ((x.l >= r.right - 1 && x.l - r.right < 12) || (x.r <= r.left + 1 && r.left - x.r < 12)));
    if (label) entries.push({label: label.s, look: st.stroke + ' dash ' + (st.strokeDasharray || 'none')});
  }
  const seen = {};
  for (const e of entries) {
    if (seen[e.look] !== undefined && seen[e.look] !== e.label) {
      problems.push('series "' + seen[e.look] + '" and "' + e.label + '" share colour and dash (' + e.look + ')');
    }
    seen[e.look] = e.label;
  }
  return {problems: [...new Set(problems)], legend: entries.length, texts: texts.length};
}`

// Legibility is what the legibility check found in one figure.
type Legibility struct {
	Problems []string `json:"problems"` // each in a line; none when legible
	Legend   int      `json:"legend"`   // legend entries recognised
	Texts    int      `json:"texts"`    // text elements checked
}

// Files opens each SVG file in headless Chromium on its own and checks it
// as the report's figures are: a print size not inlined in the page (the
// one-column figures) is checked the same way.
func Files(ctx context.Context, svgs ...string) (map[string]Legibility, error) {
	b, err := browser.Launch(ctx, browser.Options{})
	if err != nil {
		return nil, err
	}
	defer b.Close()
	out := map[string]Legibility{}
	for _, f := range svgs {
		abs, err := filepath.Abs(f)
		if err != nil {
			return nil, err
		}
		if err := b.Do(ctx, time.Minute, chromedp.EmulateViewport(1200, 900), chromedp.Navigate("file://"+abs)); err != nil {
			return nil, fmt.Errorf("rendering %s: %w", f, err)
		}
		l, err := browser.Get(ctx, b, time.Minute, chromedp.Evaluate[Legibility]("("+legible+")(document.documentElement)"))
		if err != nil {
			return nil, fmt.Errorf("checking %s: %w", f, err)
		}
		out[f] = l
	}
	return out, nil
}
