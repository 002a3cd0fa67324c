/// Checks that bytes are exactly one JSON value (RFC 8259) and removes the whitespace between
/// tokens, in one pass with no allocation but the output.
///
/// Payloads and preference values are stored and hashed byte for byte as written at their origin,
/// so this never rewrites a token: numbers, escapes and key order stay as given. It reads bytes
/// from other devices too (deltas), so it bounds nesting depth instead of recursing without limit.
public enum CompactJSON {
    /// The deepest nesting of arrays and objects accepted.
    public static let maxDepth = 64

    /// Why bytes are not one JSON value: what was wrong and the byte offset where it was found.
    public struct Problem: Error, Equatable, Sendable, CustomStringConvertible {
        public let offset: Int
        public let reason: String
        public var description: String { "\(reason) at byte \(offset + 1)" }
    }

    /// The compact form of `text`, or the problem that makes it not one JSON value.
    public static func compact(_ text: String) -> Result<String, Problem> {
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
    public static func isCompact(_ text: String) -> Bool {
        var copy = text
        return copy.withUTF8 { bytes in
            var parser = Parser(input: bytes, emitting: false)
            do throws(Problem) {
                try parser.document()
            } catch {
                return false
            }
            return parser.emitted == bytes.count
        }
    }

    struct Parser {
        let input: UnsafeBufferPointer<UInt8>
        var position = 0
        var output: [UInt8] = []
        /// Bytes kept so far (whitespace between tokens dropped).
        var emitted = 0
        let emitting: Bool

        init(input: UnsafeBufferPointer<UInt8>, emitting: Bool = true) {
            self.input = input
            self.emitting = emitting
            if emitting { output.reserveCapacity(input.count) }
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
            if emitting { output.append(input[position]) }
            emitted += 1
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
            if emitting { output.append(contentsOf: input[position..<end]) }
            emitted += end - position
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
                    case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"),
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
