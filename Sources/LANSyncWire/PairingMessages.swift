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
    /// Inviter → joiner: the group secret and the group's member records, sealed with the
    /// session's key.
    case welcome(sealed: [UInt8])
    /// Either side: the run is over, and why (for the person at the other device).
    case refused(reason: String)

    /// The most bytes one message other than `welcome` may hold.
    package static let maxBytes = 1_024
    /// The most bytes a `welcome` may hold: what a u16 length can say.
    package static let maxWelcomeBytes = 65_535
    package static let sessionBytes = 16
    package static let elementBytes = 32
    package static let confirmationBytes = 32
    /// The AEAD tag the sealed welcome adds.
    package static let sealTagBytes = 16
    /// The smallest sealed welcome: the group secret (32 bytes) and the tag, no records.
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
    /// name that is not 1–256 bytes of UTF-8, bytes left over, more than `maxBytes` or, for a
    /// welcome, `maxWelcomeBytes`).
    package static func decode(_ bytes: [UInt8]) throws(WireError) -> PairingMessage {
        guard bytes.count <= maxWelcomeBytes else {
            throw WireError("a pairing message of \(bytes.count) bytes (at most \(maxWelcomeBytes))")
        }
        var reader = ByteReader(bytes)
        let kindByte = try reader.byte()
        guard let kind = Kind(rawValue: kindByte) else {
            throw WireError("unknown pairing message kind \(kindByte) (1-5)")
        }
        guard kind == .welcome || bytes.count <= maxBytes else {
            throw WireError("a pairing message of \(bytes.count) bytes (at most \(maxBytes) but for a welcome)")
        }
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
            message = .reply(
                element: element,
                device: device,
                name: name,
                confirmation: try reader.raw(confirmationBytes)
            )
        case .confirm:
            message = .confirm(confirmation: try reader.raw(confirmationBytes))
        case .welcome:
            guard reader.remaining >= sealedBytes else {
                throw WireError("a welcome of \(reader.remaining) sealed bytes (at least \(sealedBytes))")
            }
            message = .welcome(sealed: try reader.raw(reader.remaining))
        case .refused:
            message = .refused(reason: try reader.string(atMost: WireProtocol.maxNameBytes, "reason"))
        }
        try reader.expectEnd("pairing message")
        return message
    }
}

/// The group's member records that a welcome carries after the group secret (protocol §10):
/// each a delta message in its unsigned form (§5.1 without the signed section, uncompressed) that
/// holds exactly one preference under `lansync/` and covers exactly its dot, written as a varint
/// length and the message's bytes. (The newcomer merges them to know the group; they reach it
/// again, signed, when it syncs.)
package enum WelcomeRecords {
    /// The records' bytes, in the order given, leaving out every record from the first that would
    /// take them past `limit` bytes (the rest reach the newcomer by sync).
    package static func encode(_ records: [PreferenceWrite], within limit: Int) -> (bytes: [UInt8], count: Int) {
        var writer = ByteWriter(capacity: 4_096)
        var count = 0
        for record in records {
            var message = ByteWriter()
            message.byte(WireMessage.Kind.delta.rawValue)
            DeltaCoding.encode(Delta.carrying(record), into: &message, signed: false)
            let bytes = message.bytes
            var item = ByteWriter(capacity: bytes.count + 3)
            item.varint(bytes.count)
            item.raw(bytes)
            guard writer.bytes.count + item.bytes.count <= limit else { break }
            writer.raw(item.bytes)
            count += 1
        }
        return (writer.bytes, count)
    }

    /// Reads the records; throws on anything but a sequence of one-record deltas as above.
    package static func decode(_ bytes: [UInt8]) throws(WireError) -> [PreferenceWrite] {
        var reader = ByteReader(bytes)
        var records: [PreferenceWrite] = []
        while reader.remaining > 0 {
            let length = try reader.count(atMost: reader.remaining, "member record length")
            var message = ByteReader(try reader.raw(length))
            guard try message.byte() == WireMessage.Kind.delta.rawValue else {
                throw WireError("a member record that is not a delta")
            }
            let delta = try DeltaCoding.decode(from: &message, signed: false)
            try message.expectEnd("member record")
            guard delta.entries.isEmpty, delta.rows.isEmpty, delta.preferences.count == 1,
                let record = delta.preferences.first, record.key.hasPrefix(PreferenceWrite.reservedPrefix),
                record.dot.counter > 0,
                delta == Delta.carrying(record)
            else {
                throw WireError(
                    "a member record must be one preference under \(PreferenceWrite.reservedPrefix) covering its own dot"
                )
            }
            records.append(record)
        }
        return records
    }
}
