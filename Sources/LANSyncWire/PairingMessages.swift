package import LANSyncCore

/// The messages of pairing by short code (protocol §9): a newcomer (the joiner) and a member (the
/// inviter) run CPace keyed by the code, confirm the key both ways, and the inviter hands over
/// the group secret sealed with it. Each message travels as a u16 BE length and that many bytes
/// (at most `maxBytes`), in the clear: CPace is what protects it.
package enum PairingMessage: Equatable, Sendable {
    /// Joiner → inviter: the CPace session ID it chose, its element, and who it is.
    case hello(session: [UInt8], element: [UInt8], device: DeviceID, name: String)
    /// Inviter → joiner: its element, who it is, and its key confirmation.
    case reply(element: [UInt8], device: DeviceID, name: String, confirmation: [UInt8])
    /// Joiner → inviter: the joiner's key confirmation.
    case confirm(confirmation: [UInt8])
    /// Inviter → joiner: the group secret, sealed with the session's key.
    case welcome(sealed: [UInt8])
    /// Either side: the run is over, and why (for the person at the other device).
    case refused(reason: String)

    /// The most bytes one message may hold.
    package static let maxBytes = 1_024
    package static let sessionBytes = 16
    package static let elementBytes = 32
    package static let confirmationBytes = 32
    /// The group secret (32 bytes) and the AEAD tag (16).
    package static let sealedBytes = 48

    enum Kind: UInt8 {
        case hello = 1, reply = 2, confirm = 3, welcome = 4, refused = 5
    }

    package func encoded() -> [UInt8] {
        var writer = ByteWriter(capacity: 128)
        switch self {
        case .hello(let session, let element, let device, let name):
            writer.byte(Kind.hello.rawValue)
            writer.raw(session)
            writer.raw(element)
            writer.raw(device.bytes)
            writer.string(name)
        case .reply(let element, let device, let name, let confirmation):
            writer.byte(Kind.reply.rawValue)
            writer.raw(element)
            writer.raw(device.bytes)
            writer.string(name)
            writer.raw(confirmation)
        case .confirm(let confirmation):
            writer.byte(Kind.confirm.rawValue)
            writer.raw(confirmation)
        case .welcome(let sealed):
            writer.byte(Kind.welcome.rawValue)
            writer.raw(sealed)
        case .refused(let reason):
            writer.byte(Kind.refused.rawValue)
            writer.string(reason)
        }
        return writer.bytes
    }

    /// Reads one message; throws on anything else (an unknown kind, a field of the wrong size, a
    /// name that is not 1–256 bytes of UTF-8, bytes left over, more than `maxBytes`).
    package static func decode(_ bytes: [UInt8]) throws(WireError) -> PairingMessage {
        guard bytes.count <= maxBytes else { throw WireError("a pairing message of \(bytes.count) bytes (at most \(maxBytes))") }
        var reader = ByteReader(bytes)
        let kindByte = try reader.byte()
        guard let kind = Kind(rawValue: kindByte) else { throw WireError("unknown pairing message kind \(kindByte) (1-5)") }
        func name() throws(WireError) -> String {
            let text = try reader.string(atMost: WireProtocol.maxNameBytes, "device name")
            guard !text.isEmpty else { throw WireError("an empty device name") }
            return text
        }
        let message: PairingMessage
        switch kind {
        case .hello:
            let session = try reader.raw(sessionBytes)
            let element = try reader.raw(elementBytes)
            let device = DeviceID(bytes: try reader.raw(16))!
            message = .hello(session: session, element: element, device: device, name: try name())
        case .reply:
            let element = try reader.raw(elementBytes)
            let device = DeviceID(bytes: try reader.raw(16))!
            let name = try name()
            message = .reply(element: element, device: device, name: name, confirmation: try reader.raw(confirmationBytes))
        case .confirm:
            message = .confirm(confirmation: try reader.raw(confirmationBytes))
        case .welcome:
            message = .welcome(sealed: try reader.raw(sealedBytes))
        case .refused:
            message = .refused(reason: try reader.string(atMost: WireProtocol.maxNameBytes, "reason"))
        }
        try reader.expectEnd("pairing message")
        return message
    }
}
