/// Checks that bytes are exactly one JSON value (RFC 8259) and removes the whitespace between
/// tokens, in one pass with no allocation but the output.
///
/// Payloads and preference values are stored and hashed byte for byte as written at their origin,
/// so this never rewrites a token: numbers, escapes and key order stay as given. It reads bytes
/// from other devices too (deltas), so it bounds nesting depth instead of recursing without limit.
package enum CompactJSON {
    /// The deepest nesting of arrays and objects accepted.
    package static let maxDepth = 64

    /// Why bytes are not one JSON value: what was wrong and the byte offset where it was found.
    package struct Problem: Error, Equatable, Sendable, CustomStringConvertible {
        package let offset: Int
        package let reason: String
        package var description: String { "\(reason) at byte \(offset + 1)" }
    }

    /// The compact form of `text`, or the problem that makes it not one JSON value.
    package static func compact(_ text: String) -> Result<String, Problem> {
        var copy = text
        return copy.withUTF8 { bytes in
            var parser = Parser(input: bytes)
            do throws(Problem) {
                try parser.document()
            } catch {
                return .failure(error)
            }
            return .success(String(decoding: parser.output, as: UTF8.self))
        }
    }

    /// True when `text` is one JSON value with no whitespace between tokens. Checks without
    /// copying: this runs for every row a peer sends.
    package static func isCompact(_ text: String) -> Bool {
        var copy = text
        return copy.withUTF8 { bytes in
            var validator = CompactValidator(input: bytes)
            return validator.run()
        }
    }

    struct Parser {
        let input: UnsafeBufferPointer<UInt8>
        var position = 0
        var output: [UInt8] = []

        init(input: UnsafeBufferPointer<UInt8>) {
            self.input = input
            output.reserveCapacity(input.count)
        }

        func fail(_ reason: String) -> Problem { Problem(offset: position, reason: reason) }

        var current: UInt8? { position < input.count ? input[position] : nil }

        mutating func skipWhitespace() {
            while let byte = current, byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D { position += 1 }
        }

        mutating func document() throws(Problem) {
            skipWhitespace()
            guard current != nil else { throw fail("empty input: expected a JSON value") }
            try value(depth: 0)
            skipWhitespace()
            if current != nil { throw fail("unexpected text after the JSON value") }
        }

        mutating func take() {
            output.append(input[position])
            position += 1
        }

        mutating func value(depth: Int) throws(Problem) {
            guard let byte = current else { throw fail("unexpected end: expected a value") }
            switch byte {
            case UInt8(ascii: "{"): try object(depth: depth + 1)
            case UInt8(ascii: "["): try array(depth: depth + 1)
            case UInt8(ascii: "\""): try string()
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): try number()
            case UInt8(ascii: "t"): try literal("true")
            case UInt8(ascii: "f"): try literal("false")
            case UInt8(ascii: "n"): try literal("null")
            default: throw fail("unexpected character '\(Unicode.Scalar(byte))': expected a value")
            }
        }

        mutating func object(depth: Int) throws(Problem) {
            guard depth <= CompactJSON.maxDepth else { throw fail("nested more than \(CompactJSON.maxDepth) levels") }
            take()
            skipWhitespace()
            if current == UInt8(ascii: "}") { return take() }
            while true {
                skipWhitespace()
                guard current == UInt8(ascii: "\"") else { throw fail("expected a quoted key") }
                try string()
                skipWhitespace()
                guard current == UInt8(ascii: ":") else { throw fail("expected ':' after a key") }
                take()
                skipWhitespace()
                try value(depth: depth)
                skipWhitespace()
                switch current {
                case UInt8(ascii: ","): take()
                case UInt8(ascii: "}"): return take()
                default: throw fail("expected ',' or '}' in an object")
                }
            }
        }

        mutating func array(depth: Int) throws(Problem) {
            guard depth <= CompactJSON.maxDepth else { throw fail("nested more than \(CompactJSON.maxDepth) levels") }
            take()
            skipWhitespace()
            if current == UInt8(ascii: "]") { return take() }
            while true {
                skipWhitespace()
                try value(depth: depth)
                skipWhitespace()
                switch current {
                case UInt8(ascii: ","): take()
                case UInt8(ascii: "]"): return take()
                default: throw fail("expected ',' or ']' in an array")
                }
            }
        }

        /// Takes the run of plain string characters from `position` in one step: most of a
        /// payload, checked at memory speed rather than a byte at a time.
        mutating func takePlainRun() {
            var end = position
            while end < input.count {
                let byte = input[end]
                if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") || byte < 0x20 { break }
                end += 1
            }
            output.append(contentsOf: input[position..<end])
            position = end
        }

        mutating func string() throws(Problem) {
            take()  // the opening quote
            while true {
                takePlainRun()
                guard let byte = current else { break }
                switch byte {
                case UInt8(ascii: "\""):
                    return take()
                case UInt8(ascii: "\\"):
                    take()
                    guard let escaped = current else { throw fail("unterminated escape") }
                    switch escaped {
                    case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"),
                        UInt8(ascii: "f"),
                        UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
                        take()
                    case UInt8(ascii: "u"):
                        take()
                        for _ in 0..<4 {
                            guard let hex = current, hex.isHexDigit else { throw fail("\\u needs four hex digits") }
                            take()
                        }
                    default:
                        throw fail("invalid escape '\\\(Unicode.Scalar(escaped))'")
                    }
                case 0..<0x20:
                    throw fail("control character in a string (escape it)")
                default:
                    take()
                }
            }
            throw fail("unterminated string")
        }

        mutating func digits() throws(Problem) {
            guard let byte = current, byte.isDigit else { throw fail("expected a digit") }
            while let byte = current, byte.isDigit { take() }
        }

        mutating func number() throws(Problem) {
            if current == UInt8(ascii: "-") { take() }
            if current == UInt8(ascii: "0") {
                take()
                if let byte = current, byte.isDigit { throw fail("a number cannot have a leading zero") }
            } else {
                try digits()
            }
            if current == UInt8(ascii: ".") {
                take()
                try digits()
            }
            if current == UInt8(ascii: "e") || current == UInt8(ascii: "E") {
                take()
                if current == UInt8(ascii: "+") || current == UInt8(ascii: "-") { take() }
                try digits()
            }
        }

        mutating func literal(_ word: StaticString) throws(Problem) {
            let bytes = UnsafeBufferPointer(start: word.utf8Start, count: word.utf8CodeUnitCount)
            let start = position
            for expected in bytes {
                guard current == expected else { throw Problem(offset: start, reason: "expected '\(word)'") }
                take()
            }
        }
    }
}

extension UInt8 {
    fileprivate var isDigit: Bool { self >= UInt8(ascii: "0") && self <= UInt8(ascii: "9") }
    fileprivate var isHexDigit: Bool {
        isDigit || (self >= UInt8(ascii: "a") && self <= UInt8(ascii: "f"))
            || (self >= UInt8(ascii: "A") && self <= UInt8(ascii: "F"))
    }
}

/// The yes/no answer of `CompactJSON.isCompact`, without the parser's bookkeeping: it needs no
/// output, no error messages and no whitespace handling (any whitespace between tokens is a no),
/// and keeps its nesting in a bit stack instead of recursing. It accepts exactly what
/// `CompactJSON.compact` returns unchanged (a property test holds the two together). Every row a
/// peer sends passes through it, so it is kept apart from the parser, which does more per byte
/// (`lansync-bench --stages` times both; figures in docs/journal/2026-11-speed.md).
struct CompactValidator {
    let input: UnsafeBufferPointer<UInt8>
    var position = 0

    init(input: UnsafeBufferPointer<UInt8>) { self.input = input }

    mutating func run() -> Bool {
        // Bit d of `objects` says whether the container at depth d + 1 is an object.
        var objects: UInt64 = 0
        var depth = 0
        let count = input.count
        while true {
            // A value starts here.
            guard position < count else { return false }
            switch input[position] {
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                let isObject = input[position] == UInt8(ascii: "{")
                guard depth < CompactJSON.maxDepth else { return false }
                if isObject { objects |= 1 << UInt64(depth) } else { objects &= ~(1 << UInt64(depth)) }
                depth += 1
                position += 1
                guard position < count else { return false }
                if input[position] == (isObject ? UInt8(ascii: "}") : UInt8(ascii: "]")) {
                    position += 1
                    depth -= 1
                } else {
                    if isObject { guard key() else { return false } }
                    continue
                }
            case UInt8(ascii: "\""): guard string() else { return false }
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): guard number() else { return false }
            case UInt8(ascii: "t"): guard literal(0x74, 0x72, 0x75, 0x65) else { return false }  // true
            case UInt8(ascii: "f"):  // false
                guard literal(0x66, 0x61, 0x6C, 0x73), position < count, input[position] == 0x65 else { return false }
                position += 1
            case UInt8(ascii: "n"): guard literal(0x6E, 0x75, 0x6C, 0x6C) else { return false }  // null
            default: return false
            }
            // A value ended: close containers, or go on to the next member or element.
            while true {
                if depth == 0 { return position == count }
                guard position < count else { return false }
                let inObject = objects & (1 << UInt64(depth - 1)) != 0
                let byte = input[position]
                if byte == UInt8(ascii: ",") {
                    position += 1
                    if inObject { guard key() else { return false } }
                    break
                }
                guard byte == (inObject ? UInt8(ascii: "}") : UInt8(ascii: "]")) else { return false }
                position += 1
                depth -= 1
            }
        }
    }

    /// A member's key and its colon.
    mutating func key() -> Bool {
        guard position < input.count, input[position] == UInt8(ascii: "\""), string() else { return false }
        guard position < input.count, input[position] == UInt8(ascii: ":") else { return false }
        position += 1
        return true
    }

    mutating func string() -> Bool {
        position += 1  // the opening quote
        let count = input.count
        while position < count {
            let byte = input[position]
            position += 1
            if byte == UInt8(ascii: "\"") { return true }
            if byte < 0x20 { return false }
            if byte == UInt8(ascii: "\\") {
                guard position < count else { return false }
                let escaped = input[position]
                position += 1
                switch escaped {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"),
                    UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
                    continue
                case UInt8(ascii: "u"):
                    guard position + 4 <= count else { return false }
                    for _ in 0..<4 {
                        guard input[position].isHexDigit else { return false }
                        position += 1
                    }
                default:
                    return false
                }
            }
        }
        return false
    }

    /// Digits, at least one.
    mutating func digits() -> Bool {
        let start = position
        while position < input.count, input[position].isDigit { position += 1 }
        return position > start
    }

    mutating func number() -> Bool {
        let count = input.count
        if input[position] == UInt8(ascii: "-") { position += 1 }
        guard position < count else { return false }
        if input[position] == UInt8(ascii: "0") {
            position += 1
            if position < count, input[position].isDigit { return false }
        } else {
            guard digits() else { return false }
        }
        if position < count, input[position] == UInt8(ascii: ".") {
            position += 1
            guard digits() else { return false }
        }
        if position < count, input[position] == UInt8(ascii: "e") || input[position] == UInt8(ascii: "E") {
            position += 1
            if position < count, input[position] == UInt8(ascii: "+") || input[position] == UInt8(ascii: "-") {
                position += 1
            }
            guard digits() else { return false }
        }
        return true
    }

    /// The next four bytes are exactly these.
    mutating func literal(_ a: UInt8, _ b: UInt8, _ c: UInt8, _ d: UInt8) -> Bool {
        guard position + 4 <= input.count, input[position] == a, input[position + 1] == b, input[position + 2] == c,
            input[position + 3] == d
        else { return false }
        position += 4
        return true
    }
}
