import LANSyncCore
import LANSyncCrypto
import LANSyncPairing
import LANSyncWire

/// What the session fuzzer checks for pairing: arbitrary bytes, cut into messages, fed to an
/// inviter and a joiner in any order. Neither may crash, and neither may ever end in success
/// (handing over or accepting a secret) for messages that did not come from a side with the code.
package enum PairingFuzzing {
    package static func check(_ bytes: [UInt8]) {
        let device = DeviceID(bytes: [UInt8](repeating: 3, count: 16))!
        var inviter = PairingInviter(
            code: "48213907",
            secret: SecureBytes(copying: [UInt8](repeating: 9, count: 32)),
            device: device,
            name: "i"
        )
        guard var joiner = try? PairingJoiner(code: "48213907", device: device, name: "j") else { return }
        var rest = bytes[...]
        while let first = rest.first {
            let length = Int(first) % 120 + 1
            let chunk = Array(rest.dropFirst().prefix(length))
            rest = rest.dropFirst(length + 1)
            guard let message = try? PairingMessage.decode(chunk) else { continue }
            let toInviter = first & 0x80 == 0
            let step = toInviter ? inviter.receive(message) : joiner.receive(message)
            switch step.outcome {
            case .invited?, .joined?:
                // Random bytes cannot know the confirmation keys: a success here would be a hole.
                preconditionFailure("a pairing run succeeded on fuzzed messages")
            default: break
            }
        }
    }
}
