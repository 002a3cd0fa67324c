/// The responder's side of a first handshake message when one listener serves several groups:
/// the message is opened with each group's pre-shared key in turn, and the one whose key
/// authenticates it is the initiator's group.
///
/// With `psk` first in the pattern (XXpsk0), message 1's payload is encrypted under a key mixed
/// from the pre-shared key, so only the right group's key opens it, and a wrong one costs a
/// hash, two key derivations and one failed AEAD check. Every key is tried, and then unused
/// stand-ins up to `trials`, whichever key matched and however many there are: the time a
/// responder takes tells an initiator neither which of its groups it belongs to nor how many
/// groups it serves (up to `trials`).
package enum NoiseKeyTrial {
    /// The trials a responder makes at least: more groups than this are tried all, and their
    /// number shows in the time taken only in steps of this size.
    package static let trials = 64

    /// What a first message opened with one of the keys gives: the key's index, the handshake
    /// ready for the responder's message 2, and the message's payload.
    package struct Opened: Sendable {
        package let index: Int
        package let handshake: NoiseHandshake
        package let payload: [UInt8]
    }

    /// Opens `message` (the initiator's first) with each of `psks`; nil when none authenticates it.
    package static func respond(
        to message: [UInt8],
        pattern: NoisePattern,
        prologue: [UInt8],
        staticKey: KeyPair,
        psks: [SecureBytes],
        trials: Int = NoiseKeyTrial.trials
    ) -> Opened? {
        var opened: Opened?
        let padding = psks.isEmpty ? 0 : (trials - psks.count % trials) % trials
        let standIn = SecureBytes(randomCount: 32)
        for index in 0..<(psks.count + padding) {
            var handshake = NoiseHandshake(
                pattern: pattern,
                initiator: false,
                prologue: prologue,
                staticKey: staticKey,
                psk: index < psks.count ? psks[index] : standIn
            )
            guard let payload = try? handshake.readMessage(message), index < psks.count, opened == nil else { continue }
            opened = Opened(index: index, handshake: handshake, payload: payload)
        }
        return opened
    }
}
