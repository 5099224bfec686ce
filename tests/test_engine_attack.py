"""engine.attack: one player of a two-player match tracked alone (its nbPlayers-2 Game) stays
equal to the player in engine.Versus frame for frame, the opponent's attacks applied with
receive_attack where the match released one."""

from __future__ import annotations

import numpy as np
import pytest

import engine
from engine.attack import attack_cells, receive_attack, released_attack
from engine.placement import at_spawn
from policy.versus import Config, Match, make_player

SAME = ("pill_x", "pill_y", "pill_rotation", "pill_colors", "next_colors", "next_action",
        "speed_counter", "speed_ups", "pills_counter", "status", "hor_velocity")  # fmt: skip


def state_of(p) -> tuple:
    return (
        bytes(np.asarray(p.field)),
        *(bytes(np.atleast_1d(np.asarray(getattr(p, k)))) for k in SAME),
    )


def test_attack_cells_follow_the_frame_counter():
    assert attack_cells(2, 0x47) == [3, 7]
    assert attack_cells(3, 0x45) == [1, 3, 5]
    assert attack_cells(4, 0x45) == [1, 3, 5, 7]
    assert attack_cells(9, 0x44) == [0, 2, 4, 6]  # more than 4 halves: 4
    with pytest.raises(ValueError, match="2 or more"):
        attack_cells(1, 0)


@pytest.mark.parametrize("seed", [0x1A2C, 0x5E70])
def test_a_player_tracked_alone_with_its_attacks_equals_the_match(seed):
    match = Match(level1=8, speed1=1, level2=8, speed2=1, seed=seed, frame_counter=seed >> 1 & 0xFF)
    players = [make_player("greedy", 5, Config("greedy", "greedy"), match, i) for i in range(2)]
    v = match.versus()
    frames = attacks = rounds = 0
    while int(v.phase) != int(engine.Phase.MATCH_OVER) and rounds < 5:
        rounds += 1
        alone = [v.player(i).game() for i in range(2)]
        queue: list[list[int]] = [[], []]
        while int(v.phase) in (int(engine.Phase.INTRO), int(engine.Phase.PLAYING)):
            for i in range(2):
                g = v.player(i).game()
                if not queue[i] and at_spawn(g):
                    queue[i] = [int(m) for m in players[i].act(g).masks]
            pads = [queue[i].pop(0) if queue[i] else 0 for i in range(2)]
            v.step(pads[0], pads[1])
            if int(v.phase) not in (int(engine.Phase.INTRO), int(engine.Phase.PLAYING)):
                break  # the round's end is the match's, not a lone player's
            for i in range(2):
                was = int(alone[i].next_action)
                alone[i].step(pads[i])
                p = v.player(i)
                if released_attack(was, alone[i]) and state_of(alone[i]) != state_of(p):
                    row0 = np.asarray(p.field)[:8]
                    for size in (2, 3, 4):  # the size the picture would tell
                        cells = attack_cells(size, int(alone[i].frame_counter))
                        trial = alone[i].clone()
                        receive_attack(trial, size, [int(row0[c]) & 0x0F for c in cells])
                        if state_of(trial) == state_of(p):
                            alone[i], attacks = trial, attacks + 1
                            break
                assert state_of(alone[i]) == state_of(p), (i, int(v.frame))
            frames += 1
        if int(v.phase) == int(engine.Phase.ROUND_OVER):
            v.next_round(int(v.frame_counter))
    assert rounds >= 3 and frames > 3000 and attacks >= 2, (rounds, frames, attacks)


def test_receive_attack_refuses_a_game_not_right_after_check_attack():
    g = engine.Versus(3, 1, 3, 1, 0x2222).p2.game()
    with pytest.raises(ValueError, match="right after the step"):
        receive_attack(g, 2, [0, 1])
