import Foundation
import LinkRelaySupport

/// The ops page's charts, written as SVG on the server: no script draws them and nothing is loaded for
/// them. Colours are presentation attributes (`fill`), which the page's CSP allows where inline styles
/// are not; text is `currentColor`, so a chart follows the page's light or dark scheme. Each column or
/// row carries a `<title>`: a browser shows it on hover, a screen reader reads it.
enum SVGChart {
    /// One stacked layer: its name (in the legend) and colour, and one value per column or row.
    struct Series: Sendable {
        var name: String
        var color: String
        var values: [Int]
    }

    static let width = 640.0
    /// Room left of the plot for the scale (columns) or the row names (bars).
    static let columnsLeft = 36.0
    static let barsLeft = 84.0
    static let right = 40.0
    static let top = 8.0
    static let plotHeight = 120.0
    static let rowHeight = 22.0
    static let axisHeight = 16.0
    static let legendHeight = 20.0

    /// Stacked columns, one per entry of `titles` (a minute, say), each the sum of the series' values
    /// there; heights are proportional to the values, the scale running from 0 to `scaleTop` of them.
    /// `axis` is what the x axis says at its two ends.
    static func columns(label: String, series: [Series], titles: [String], axis: (start: String, end: String))
        -> String
    {
        let count = titles.count
        let totals = (0..<count).map { index in series.reduce(0) { $0 + $1.values[index] } }
        let scale = scaleTop(totals.max() ?? 0)
        let plotWidth = width - columnsLeft - right
        let step = plotWidth / Double(max(count, 1))
        let baseline = top + plotHeight
        let height = baseline + axisHeight + legendHeight
        var svg = open(label: label, height: height)
        svg += grid(from: columnsLeft, to: width - right, baseline: baseline, scale: scale)
        for index in 0..<count {
            var y = baseline
            var rects = ""
            for layer in series where layer.values[index] > 0 {
                let h = Double(layer.values[index]) / Double(scale) * plotHeight
                y -= h
                rects += rect(
                    x: columnsLeft + Double(index) * step + step * 0.1, y: y, width: step * 0.8, height: h,
                    fill: layer.color)
            }
            let tally = series.map { "\($0.name) \($0.values[index])" }.joined(separator: ", ")
            svg += "<g><title>\(escape(titles[index])): \(escape(tally))</title>\(rects)</g>"
        }
        svg += text(axis.start, x: columnsLeft, y: baseline + 13, anchor: "start")
        svg += text(axis.end, x: width - right, y: baseline + 13, anchor: "end")
        svg += legend(series, y: baseline + axisHeight + 4)
        return svg + "</svg>"
    }

    /// Stacked horizontal bars, one per entry of `rows` (an age bucket, a transport), with its total at
    /// its end; lengths are proportional to the values, the scale running from 0 to `scaleTop` of the
    /// largest total.
    static func bars(label: String, series: [Series], rows: [String]) -> String {
        let totals = rows.indices.map { index in series.reduce(0) { $0 + $1.values[index] } }
        let scale = scaleTop(totals.max() ?? 0)
        let plotWidth = width - barsLeft - right
        let baseline = top + rowHeight * Double(rows.count)
        let height = baseline + axisHeight + (series.count > 1 ? legendHeight : 0)
        var svg = open(label: label, height: height)
        for (index, row) in rows.enumerated() {
            let y = top + rowHeight * Double(index)
            var x = barsLeft
            var rects = ""
            for layer in series where layer.values[index] > 0 {
                let w = Double(layer.values[index]) / Double(scale) * plotWidth
                rects += rect(x: x, y: y + 3, width: w, height: rowHeight - 6, fill: layer.color)
                x += w
            }
            let tally = series.map { "\($0.name) \($0.values[index])" }.joined(separator: ", ")
            svg += "<g><title>\(escape(row)): \(escape(tally))</title>"
            svg += text(row, x: barsLeft - 6, y: y + rowHeight / 2 + 4, anchor: "end")
            svg += rects + text(String(totals[index]), x: x + 4, y: y + rowHeight / 2 + 4, anchor: "start") + "</g>"
        }
        svg += line(x1: barsLeft, y1: top, x2: barsLeft, y2: baseline)
        svg += text("0", x: barsLeft, y: baseline + 13, anchor: "middle")
        svg += text(String(scale), x: width - right, y: baseline + 13, anchor: "middle")
        if series.count > 1 { svg += legend(series, y: baseline + axisHeight + 4) }
        return svg + "</svg>"
    }

    /// The top of the scale for a largest value: the next 1, 2 or 5 times a power of ten (at least 1),
    /// so that the scale reads as a round number.
    static func scaleTop(_ largest: Int) -> Int {
        var power = 1
        while true {
            for step in [1, 2, 5] where step * power >= largest { return step * power }
            power *= 10
        }
    }

    private static func open(label: String, height: Double) -> String {
        "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\" role=\"img\" aria-label=\"\(escape(label))\" "
            + "viewBox=\"0 0 \(number(width)) \(number(height))\" font-size=\"11\" fill=\"currentColor\">"
    }

    /// The baseline, a dashed line at the top of the scale, and the scale's two ends.
    private static func grid(from left: Double, to right: Double, baseline: Double, scale: Int) -> String {
        line(x1: left, y1: baseline, x2: right, y2: baseline)
            + line(x1: left, y1: top, x2: right, y2: top, dashed: true)
            + text("0", x: left - 4, y: baseline + 4, anchor: "end")
            + text(String(scale), x: left - 4, y: top + 4, anchor: "end")
    }

    private static func legend(_ series: [Series], y: Double) -> String {
        var x = columnsLeft
        var svg = ""
        for layer in series {
            svg += rect(x: x, y: y, width: 10, height: 10, fill: layer.color)
            svg += text(layer.name, x: x + 14, y: y + 9, anchor: "start")
            // About 6.5 px a character at this size, and a gap before the next swatch.
            x += 14 + Double(layer.name.count) * 6.5 + 16
        }
        return svg
    }

    private static func rect(x: Double, y: Double, width: Double, height: Double, fill: String) -> String {
        "<rect x=\"\(number(x))\" y=\"\(number(y))\" width=\"\(number(width))\" height=\"\(number(height))\" "
            + "fill=\"\(escape(fill))\"/>"
    }

    private static func line(x1: Double, y1: Double, x2: Double, y2: Double, dashed: Bool = false) -> String {
        "<line x1=\"\(number(x1))\" y1=\"\(number(y1))\" x2=\"\(number(x2))\" y2=\"\(number(y2))\" "
            + "stroke=\"currentColor\" stroke-opacity=\"0.4\"\(dashed ? " stroke-dasharray=\"3 3\"" : "")/>"
    }

    private static func text(_ value: String, x: Double, y: Double, anchor: String) -> String {
        "<text x=\"\(number(x))\" y=\"\(number(y))\" text-anchor=\"\(anchor)\">\(escape(value))</text>"
    }

    /// At most two decimals, without trailing zeros: short, and exact enough for a pixel.
    static func number(_ value: Double) -> String {
        let rounded = (value * 100).rounded() / 100
        return rounded == rounded.rounded() ? String(Int(rounded)) : String(rounded)
    }

    static func escape(_ text: String) -> String { HTML.escape(text) }
}
