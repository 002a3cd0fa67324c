import LANSyncCore

/// What the fuzzer (and the corpus replay in the tests) checks for one input.
package enum WireFuzzing {
    package static func check(_ bytes: [UInt8]) {
        if let message = try? WireMessage.decode(bytes) {
            // Whatever decodes re-encodes to something that decodes to the same value.
            let again = try? WireMessage.decode(message.encoded())
            precondition(again == message, "wire message did not survive a round trip")
            let packed = try? WireMessage.decode(message.wireBytes())
            precondition(packed == message, "wire message did not survive compression")
            if case .delta(let delta) = message { _ = delta.problem() }
            if case .push(let push) = message {
                // A fresh connection's tables: slots must be defined in order before use.
                var decoder = EntryPushDecoder()
                if let entry = try? decoder.entry(from: push) {
                    _ = EntryPush.delta(carrying: entry, signature: push.signature).problem()
                }
            }
            if case .rowPush(let push) = message {
                var decoder = RowPushDecoder()
                if let change = try? decoder.change(from: push) {
                    _ = RowPush.delta(carrying: change, signature: push.signature).problem()
                }
            }
        }
        if let hello = try? Hello.decode(bytes) {
            precondition((try? Hello.decode(hello.encoded())) == hello, "hello did not survive a round trip")
        }
        _ = try? VersionOffer.decode(bytes)
        if let pairing = try? PairingMessage.decode(bytes) {
            precondition(
                (try? PairingMessage.decode(pairing.encoded())) == pairing,
                "pairing message did not survive a round trip"
            )
        }
        // Frames: the first byte of each 7-byte slice plays the flags byte.
        var reassembler = Framing.Reassembler(maxMessageBytes: 64 * 1024)
        var start = 0
        while start < bytes.count {
            let end = min(start + 7, bytes.count)
            guard (try? reassembler.add(Array(bytes[start..<end]))) != nil else { break }
            start = end
        }
        _ = CompactJSON.isCompact(String(decoding: bytes, as: UTF8.self))
    }
}

/// Entry points for tests of the wire's internals.
package enum WireTesting {
    /// Compresses bytes as the wire does (zstd).
    package static func compress(_ bytes: [UInt8]) -> [UInt8] { Zstd.compress(bytes) ?? [] }
}
