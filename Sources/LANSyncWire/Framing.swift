/// Frames on the TCP stream: a 2-byte big-endian length, then that many bytes (a Noise message).
///
/// After the handshake, a message longer than one frame is carried in several: each frame's
/// plaintext starts with a flags byte whose bit 0 says "more frames of this message follow".
package enum Framing {
    /// The largest frame body: a whole Noise message.
    package static let maxFrameBytes = 65_535
    /// Plaintext per frame: a Noise transport message holds 65,535 bytes including its 16-byte tag.
    package static let maxChunkBytes = maxFrameBytes - 16 - 1

    /// The frames' plaintexts for one message: flags byte + chunk each.
    package static func chunks(of message: [UInt8]) -> [[UInt8]] {
        guard !message.isEmpty else { return [[0]] }
        var out = [[UInt8]]()
        var start = 0
        while start < message.count {
            let end = min(start + maxChunkBytes, message.count)
            out.append([end < message.count ? 1 : 0] + message[start..<end])
            start = end
        }
        return out
    }

    /// Puts chunked messages back together, refusing any that would exceed `maxMessageBytes`.
    package struct Reassembler: Sendable {
        private var pending: [UInt8] = []
        package let maxMessageBytes: Int

        package init(maxMessageBytes: Int = WireProtocol.maxMessageBytes) { self.maxMessageBytes = maxMessageBytes }

        /// Takes one frame's plaintext; returns a complete message when this frame ends one.
        package mutating func add(_ plaintext: [UInt8]) throws(WireError) -> [UInt8]? {
            guard let flags = plaintext.first, flags <= 1 else { throw WireError("frame without a valid flags byte") }
            guard pending.count + plaintext.count - 1 <= maxMessageBytes else {
                throw WireError("message exceeds \(maxMessageBytes) bytes")
            }
            pending.append(contentsOf: plaintext.dropFirst())
            guard flags == 0 else { return nil }
            defer { pending = [] }
            return pending
        }
    }
}
