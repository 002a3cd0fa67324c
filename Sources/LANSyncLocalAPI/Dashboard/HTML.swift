import Foundation

/// Server-rendered pages: text escaped once, here, and one layout for every page. No script:
/// the pages work in any browser, charts are SVG drawn on the server (`StackedBarChart`).
enum HTML {
    static func escape(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for character in text {
            switch character {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default: out.append(character)
            }
        }
        return out
    }

    /// A query-string or path component.
    static func component(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed.subtracting(.init(charactersIn: "/?&=#+")))
            ?? text
    }

    /// A table: header cells, then rows of cells already escaped (or built from escaped parts).
    static func table(_ header: [String], _ rows: [[String]], id: String? = nil) -> String {
        let head = header.map { "<th>\(escape($0))</th>" }.joined()
        let body = rows.map { "<tr>" + $0.map { "<td>\($0)</td>" }.joined() + "</tr>" }.joined(separator: "\n")
        return
            "<div class=\"scroll\"><table\(id.map { " id=\"\(escape($0))\"" } ?? "")><thead><tr>\(head)</tr></thead><tbody>\n\(body)\n</tbody></table></div>"
    }

    /// A page: `base` is where its group's pages are; `group` names the group on a node of several,
    /// whose header then links to the list of groups (`current` "groups" is that list).
    static func page(
        title: String,
        device: String,
        current: String,
        refresh: Int? = nil,
        base: String = "/dashboard",
        group: String? = nil,
        body: String
    ) -> String {
        // (label, where it goes, the `current` it stands for)
        var links: [(String, String, String)] = []
        if group != nil || current == "groups" { links.append(("all groups", "/dashboard/", "groups")) }
        if current != "groups" {
            for (name, path) in [
                ("group", "/"), ("streams", "/streams"), ("tables", "/tables"), ("preferences", "/preferences"),
            ] {
                links.append((name, base + path, name))
            }
        }
        let navigation = links.map { label, href, key in
            "<a href=\"\(href)\"\(key == current ? " aria-current=\"page\"" : "")>\(escape(label))</a>"
        }.joined(separator: " ")
        let groupLabel = group.map { "<span id=\"group-name\">group <strong>\(escape($0))</strong></span>" } ?? ""
        return """
            <!doctype html>
            <html lang="en"><head><meta charset="utf-8">
            <meta name="viewport" content="width=device-width, initial-scale=1">
            \(refresh.map { "<meta http-equiv=\"refresh\" content=\"\($0)\">" } ?? "")
            <title>\(escape(title)) · LANSync</title>
            <style>
            body { font: 15px/1.45 system-ui, sans-serif; margin: 0; color: #1d232a; background: #f6f7f9; }
            header { background: #20364d; color: #fff; padding: .6rem 1rem; display: flex; flex-wrap: wrap; gap: .4rem 1.2rem; align-items: baseline; }
            header strong { font-size: 1.1rem; } header a { color: #cfe3ff; text-decoration: none; }
            header a[aria-current] { color: #fff; text-decoration: underline; }
            main { padding: 1rem; max-width: 72rem; margin: auto; }
            section { background: #fff; border-radius: .5rem; padding: .8rem 1rem; margin-bottom: 1rem; box-shadow: 0 1px 2px #0001; }
            h1 { font-size: 1.3rem; margin: .2rem 0 .8rem; } h2 { font-size: 1.05rem; margin: .2rem 0 .6rem; }
            .scroll { overflow-x: auto; } table { border-collapse: collapse; width: 100%; font-size: .9rem; }
            th, td { text-align: left; padding: .3rem .5rem; border-bottom: 1px solid #e3e6ea; vertical-align: top; }
            td code, .mono { font-family: ui-monospace, monospace; font-size: .85rem; word-break: break-all; }
            .ok { color: #17703a; font-weight: 600; } .warn { color: #a35b00; font-weight: 600; } .bad { color: #b3261e; font-weight: 600; }
            figure { margin: 0 0 1rem; } svg { width: 100%; max-width: 44rem; height: auto; display: block; } .legend { display: flex; flex-wrap: wrap; gap: .3rem 1rem; font-size: .85rem; }
            .legend span::before { content: ""; display: inline-block; width: .8rem; height: .8rem; margin-right: .3rem; background: var(--c); vertical-align: -1px; }
            form { display: flex; flex-wrap: wrap; gap: .5rem; align-items: end; } label { font-size: .85rem; display: grid; }
            input, select, button { font: inherit; padding: .25rem .4rem; }
            </style></head>
            <body><header><strong>LANSync</strong><span class="mono">\(escape(device))</span>\(groupLabel)<nav>\(navigation)</nav></header>
            <main><h1>\(escape(title))</h1>
            \(body)
            </main></body></html>
            """
    }
}
