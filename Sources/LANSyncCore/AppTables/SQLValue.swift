/// One SQLite value, exactly as it must round-trip between devices: a REAL keeps its 64 bits
/// (NaN payloads and -0.0 included), a BLOB its bytes, TEXT its UTF-8.
///
/// Equal means the same type and the same bytes, as SQLite compares them. TEXT is compared by its
/// UTF-8, not as Swift strings: `"\u{e9}"` and `"e\u{301}"` are one `String` ("é" spelled two
/// ways) but two values in SQLite, two keys of two rows, and an edit from one to the other is a
/// change every peer must receive.
package enum SQLValue: Hashable, Sendable, Comparable, CustomStringConvertible {
    case null
    case integer(Int64)
    /// The IEEE 754 bit pattern: comparing and hashing bits, never floating-point values, keeps
    /// `-0.0`, `0.0` and every NaN apart, so every replica picks the same winner.
    case realBits(UInt64)
    case text(String)
    case blob([UInt8])

    package static func real(_ value: Double) -> SQLValue { .realBits(value.bitPattern) }

    package static func == (a: SQLValue, b: SQLValue) -> Bool {
        switch (a, b) {
        case (.null, .null): return true
        case (.integer(let x), .integer(let y)): return x == y
        case (.realBits(let x), .realBits(let y)): return x == y
        case (.text(let x), .text(let y)): return x.utf8.elementsEqual(y.utf8)
        case (.blob(let x), .blob(let y)): return x == y
        default: return false
        }
    }

    package func hash(into hasher: inout Hasher) {
        hasher.combine(rank)
        switch self {
        case .null: break
        case .integer(let value): hasher.combine(value)
        case .realBits(let bits): hasher.combine(bits)
        case .text(var text):
            hasher.combine(text.utf8.count)
            text.withUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
        case .blob(let bytes): hasher.combine(bytes)
        }
    }

    /// SQLite's own type order (NULL < numbers < TEXT < BLOB), then the value: a total order used
    /// only to break ties between two writes with the same clock and dot, which honest replicas
    /// never produce, so that even then every replica keeps the same one.
    package static func < (a: SQLValue, b: SQLValue) -> Bool {
        switch (a, b) {
        case (.integer(let x), .integer(let y)): return x < y
        case (.realBits(let x), .realBits(let y)): return x < y
        case (.text(let x), .text(let y)): return Array(x.utf8).lexicographicallyPrecedes(Array(y.utf8))
        case (.blob(let x), .blob(let y)): return x.lexicographicallyPrecedes(y)
        default: return a.rank < b.rank
        }
    }

    /// What the value costs in a change: TEXT and BLOB their length, numbers 8 bytes.
    package var byteCount: Int {
        switch self {
        case .null: return 1
        case .integer, .realBits: return 8
        case .text(let text): return text.utf8.count
        case .blob(let bytes): return bytes.count
        }
    }

    private var rank: Int {
        switch self {
        case .null: return 0
        case .integer: return 1
        case .realBits: return 2
        case .text: return 3
        case .blob: return 4
        }
    }

    package var description: String {
        switch self {
        case .null: return "NULL"
        case .integer(let value): return "\(value)"
        case .realBits(let bits): return "\(Double(bitPattern: bits))"
        case .text(let value): return "'\(value)'"
        case .blob(let bytes): return "x'" + bytes.map { String($0, radix: 16).leftPadded(to: 2) }.joined() + "'"
        }
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}

/// A row of an app table, wherever it lives: the table's name and its primary key's values.
package struct RowKey: Hashable, Sendable, CustomStringConvertible {
    package let table: String
    package let primaryKey: [SQLValue]

    package init(table: String, primaryKey: [SQLValue]) {
        self.table = table
        self.primaryKey = primaryKey
    }

    package var description: String { "\(table):" + primaryKey.map(\.description).joined(separator: ",") }
}
