import Foundation
package import LANSyncCore

/// Where a reader of the change feed is: the version vector of everything it has been sent.
/// Written as an opaque string (`v1.` and base64url of, per replica in ID order, its 16-byte ID
/// and its counter as 8 bytes big-endian), so a client stores it and hands it back without
/// reading it. Resuming from it sends exactly what it does not cover: no change is missed and
/// none is sent twice.
package struct FeedCursor: Sendable, Equatable {
    package var vector: VersionVector

    package init(_ vector: VersionVector = VersionVector()) { self.vector = vector }

    /// At most this many replicas in a cursor: far more than any group has ever written, and a
    /// bound on what a client's string makes us decode.
    static let maxReplicas = 4_096

    package var text: String {
        var bytes = [UInt8]()
        for (replica, counter) in vector.counters.sorted(by: { $0.key < $1.key }) where counter > 0 {
            bytes.append(contentsOf: replica.bytes)
            for shift in stride(from: 56, through: 0, by: -8) {
                bytes.append(UInt8(truncatingIfNeeded: counter >> UInt64(shift)))
            }
        }
        let base64 = Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(
                of: "=",
                with: ""
            )
        return "v1." + base64
    }

    /// Reads a cursor this API wrote; nil for anything else.
    package init?(text: String) {
        guard text.hasPrefix("v1."), text.utf8.count <= 3 + (Self.maxReplicas * 24 * 4 + 2) / 3 else { return nil }
        var base64 = text.dropFirst(3).replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.utf8.count % 4 != 0 { base64 += "=" }
        guard let data = Data(base64Encoded: base64), data.count % 24 == 0 else { return nil }
        let bytes = [UInt8](data)
        var counters = [ReplicaID: UInt64]()
        var previous: ReplicaID?
        for start in stride(from: 0, to: bytes.count, by: 24) {
            guard let replica = ReplicaID(bytes: Array(bytes[start..<start + 16])) else { return nil }
            var counter: UInt64 = 0
            for byte in bytes[start + 16..<start + 24] { counter = counter << 8 | UInt64(byte) }
            // One encoding per cursor: replicas ascending, counters within the protocol's range.
            guard previous.map({ $0 < replica }) ?? true, (1...Dot.maxCounter).contains(counter) else { return nil }
            previous = replica
            counters[replica] = counter
        }
        vector = VersionVector(counters)
        // One spelling per cursor: "+" for "-", padding or spare bits set would read, but are not ours.
        guard self.text == text else { return nil }
    }
}
