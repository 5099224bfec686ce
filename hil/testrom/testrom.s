; hil test ROM: shows the controller byte the console read, every frame.
;
; The project's own NES program (no Nintendo code or data), assembled with ca65 and linked
; with ld65 (nrom.cfg) by hil/testrom/__init__.py. It proves that a controller path (the
; firmware core behind hil.link.vdevice, hil.consoles.emu's emulator) delivers every scheduled mask
; on its frame. Facts it shares with Python are listed in hil/testrom/__init__.py.
;
; Each NMI (one per frame while NMI is on):
;   1. strobe the controller and read its 8 bits, twice, and AND the two reads, as Dr. Mario's
;      getInputs [$B7E1] does (both reads stored, and their AND);
;   2. count the NMI (16-bit);
;   3. draw the byte: 8 boxes of 16x16 NES pixels, A (bit 7) on the left to Right (bit 0) on
;      the right, filled when the bit is set, an outline when clear; the byte in hex below
;      them, and the NMI count in hex below that.
; The main loop waits for each NMI. After every 64th NMI it keeps NMI off for two vblanks, as
; Dr. Mario does while it loads a screen: two frames without a controller read (lag frames).
;
; RAM (the Python side reads these addresses):
;   $10 PAD        the AND of the two reads of the latest NMI
;   $11 READ1      the first read      $12 READ2   the second read
;   $13 NMI_COUNT  NMIs so far (16-bit, little-endian), one per frame that read the pad
;   $15 LAG_COUNT  vblanks the main loop spent with NMI off (8-bit, wraps)

.setcpu "6502"

PPUCTRL   = $2000
PPUMASK   = $2001
PPUSTATUS = $2002
PPUSCROLL = $2005
PPUADDR   = $2006
PPUDATA   = $2007
DMCFREQ   = $4010
JOY1      = $4016
APUFRAME  = $4017

PAD       = $10
READ1     = $11
READ2     = $12
NMI_COUNT = $13
LAG_COUNT = $15
NMI_DONE  = $16
BITS      = $17

CTRL_NMI_ON  = %10000000        ; NMI at vblank, both pattern tables at $0000, nametable $2000
MASK_SHOW_BG = %00001010        ; background on, also in the leftmost 8 pixels; sprites off

TILE_BLANK  = $00
TILE_SOLID  = $01
TILE_TL     = $02               ; the four corners of an outlined 16x16 box
TILE_TR     = $03
TILE_BL     = $04
TILE_BR     = $05
TILE_DIGIT0 = $10               ; $10-$1F: hex digits 0-F

BOX_ADDR       = $2000 + 12 * 32 + 4    ; row 12, column 4: NES pixel (32, 96)
PAD_HEX_ADDR   = $2000 + 16 * 32 + 15   ; NES pixel (120, 128)
COUNT_HEX_ADDR = $2000 + 18 * 32 + 14   ; NES pixel (112, 144)
LAG_EVERY      = $3F            ; lag frames after NMIs whose count is a multiple of 64
LAG_FRAMES     = 2

.segment "HEADER"
        .byte "NES", $1A
        .byte 1                 ; 16 KiB PRG
        .byte 1                 ; 8 KiB CHR
        .byte $00, $00          ; mapper 0, horizontal mirroring
        .byte 0, 0, 0, 0, 0, 0, 0, 0

.segment "CODE"

reset:
        sei
        cld
        ldx #$40
        stx APUFRAME            ; no APU frame IRQ
        ldx #$FF
        txs
        inx
        stx PPUCTRL             ; NMI off
        stx PPUMASK             ; rendering off
        stx DMCFREQ             ; no DMC IRQ
        bit PPUSTATUS
@vblank1:
        bit PPUSTATUS           ; the PPU needs two vblanks to warm up
        bpl @vblank1
        lda #0
        tax
@clear_ram:
        sta $0000, x
        sta $0100, x
        sta $0200, x
        sta $0300, x
        sta $0400, x
        sta $0500, x
        sta $0600, x
        sta $0700, x
        inx
        bne @clear_ram
@vblank2:
        bit PPUSTATUS
        bpl @vblank2

        lda #$3F                ; background palette 0
        sta PPUADDR
        lda #$00
        sta PPUADDR
        ldx #0
@palette:
        lda palette, x
        sta PPUDATA
        inx
        cpx #4
        bne @palette

        lda #$20                ; nametable $2000-$23FF (attributes included): blank
        sta PPUADDR
        lda #$00
        sta PPUADDR
        ldy #4
        tax
@clear_nt:
        sta PPUDATA
        inx
        bne @clear_nt
        dey
        bne @clear_nt

        lda #0
        sta PPUSCROLL
        sta PPUSCROLL
        lda #CTRL_NMI_ON
        sta PPUCTRL
        lda #MASK_SHOW_BG
        sta PPUMASK

main:
        lda NMI_DONE
        beq main
        lda #0
        sta NMI_DONE
        lda NMI_COUNT
        and #LAG_EVERY
        bne main
        sta PPUCTRL             ; A = 0: NMI off (the NMI read PPUSTATUS, so the next
        ldy #LAG_FRAMES         ; vblank flag seen here is the next frame's)
@lag:
        bit PPUSTATUS
        bpl @lag
        inc LAG_COUNT
        dey
        bne @lag
        lda #CTRL_NMI_ON        ; PPUSTATUS was just read: no NMI until the next vblank
        sta PPUCTRL
        jmp main

nmi:
        pha
        txa
        pha
        tya
        pha

        jsr read_pad
        sta READ1
        jsr read_pad
        sta READ2
        and READ1
        sta PAD
        inc NMI_COUNT
        bne @counted
        inc NMI_COUNT + 1
@counted:
        bit PPUSTATUS           ; reset the PPUADDR write latch

        lda #>BOX_ADDR          ; upper halves of the boxes
        sta PPUADDR
        lda #<BOX_ADDR
        sta PPUADDR
        lda PAD
        sta BITS
        ldx #8
@top:
        asl BITS
        bcc @top_clear
        lda #TILE_SOLID
        sta PPUDATA
        sta PPUDATA
        bne @top_gap            ; always taken (A = 1)
@top_clear:
        lda #TILE_TL
        sta PPUDATA
        lda #TILE_TR
        sta PPUDATA
@top_gap:
        lda #TILE_BLANK
        sta PPUDATA
        dex
        bne @top

        lda #>(BOX_ADDR + 32)   ; lower halves
        sta PPUADDR
        lda #<(BOX_ADDR + 32)
        sta PPUADDR
        lda PAD
        sta BITS
        ldx #8
@bottom:
        asl BITS
        bcc @bottom_clear
        lda #TILE_SOLID
        sta PPUDATA
        sta PPUDATA
        bne @bottom_gap
@bottom_clear:
        lda #TILE_BL
        sta PPUDATA
        lda #TILE_BR
        sta PPUDATA
@bottom_gap:
        lda #TILE_BLANK
        sta PPUDATA
        dex
        bne @bottom

        lda #>PAD_HEX_ADDR
        sta PPUADDR
        lda #<PAD_HEX_ADDR
        sta PPUADDR
        lda PAD
        jsr put_hex
        lda #>COUNT_HEX_ADDR
        sta PPUADDR
        lda #<COUNT_HEX_ADDR
        sta PPUADDR
        lda NMI_COUNT + 1
        jsr put_hex
        lda NMI_COUNT
        jsr put_hex

        lda #0
        sta PPUSCROLL
        sta PPUSCROLL
        lda #CTRL_NMI_ON
        sta PPUCTRL
        lda #1
        sta NMI_DONE

        pla
        tay
        pla
        tax
        pla
irq:
        rti

; Strobes the controller and shifts in its 8 bits from D0, the first (A) ending in bit 7.
; Returns the byte in A; uses X and BITS.
read_pad:
        ldx #1
        stx JOY1
        dex
        stx JOY1
        ldx #8
@bit:
        lda JOY1
        lsr a
        rol BITS
        dex
        bne @bit
        lda BITS
        rts

; Writes A as two hex digit tiles at the current PPU address.
put_hex:
        pha
        lsr a
        lsr a
        lsr a
        lsr a
        ora #TILE_DIGIT0
        sta PPUDATA
        pla
        and #$0F
        ora #TILE_DIGIT0
        sta PPUDATA
        rts

palette:
        .byte $0F, $30, $16, $2A ; black, white, red, green

.segment "VECTORS"
        .word nmi, reset, irq

; Pattern table: 16 bytes a tile (8 rows of bit plane 0, then 8 of bit plane 1); only plane 0
; is used (colour 1, white). Drawn for this project.
.segment "CHARS"
        .res 16, $00                                    ; $00 blank
        .res 8, $FF                                     ; $01 solid
        .res 8, $00
        .byte $FF, $80, $80, $80, $80, $80, $80, $80    ; $02 box corner, top left
        .res 8, $00
        .byte $FF, $01, $01, $01, $01, $01, $01, $01    ; $03 top right
        .res 8, $00
        .byte $80, $80, $80, $80, $80, $80, $80, $FF    ; $04 bottom left
        .res 8, $00
        .byte $01, $01, $01, $01, $01, $01, $01, $FF    ; $05 bottom right
        .res 8, $00
        .res (TILE_DIGIT0 - 6) * 16, $00                ; $06-$0F unused
        ; $10-$1F: hex digits, a 5x7 font in an 8x8 cell
        .byte %00111000, %01000100, %01001100, %01010100, %01100100, %01000100, %00111000, 0
        .res 8, $00
        .byte %00010000, %00110000, %00010000, %00010000, %00010000, %00010000, %00111000, 0
        .res 8, $00
        .byte %00111000, %01000100, %00000100, %00011000, %00100000, %01000000, %01111100, 0
        .res 8, $00
        .byte %01111100, %00001000, %00010000, %00001000, %00000100, %01000100, %00111000, 0
        .res 8, $00
        .byte %00001000, %00011000, %00101000, %01001000, %01111100, %00001000, %00001000, 0
        .res 8, $00
        .byte %01111100, %01000000, %01111000, %00000100, %00000100, %01000100, %00111000, 0
        .res 8, $00
        .byte %00011000, %00100000, %01000000, %01111000, %01000100, %01000100, %00111000, 0
        .res 8, $00
        .byte %01111100, %00000100, %00001000, %00010000, %00100000, %00100000, %00100000, 0
        .res 8, $00
        .byte %00111000, %01000100, %01000100, %00111000, %01000100, %01000100, %00111000, 0
        .res 8, $00
        .byte %00111000, %01000100, %01000100, %00111100, %00000100, %00001000, %00110000, 0
        .res 8, $00
        .byte %00111000, %01000100, %01000100, %01111100, %01000100, %01000100, %01000100, 0
        .res 8, $00
        .byte %01111000, %01000100, %01000100, %01111000, %01000100, %01000100, %01111000, 0
        .res 8, $00
        .byte %00111000, %01000100, %01000000, %01000000, %01000000, %01000100, %00111000, 0
        .res 8, $00
        .byte %01110000, %01001000, %01000100, %01000100, %01000100, %01001000, %01110000, 0
        .res 8, $00
        .byte %01111100, %01000000, %01000000, %01111000, %01000000, %01000000, %01111100, 0
        .res 8, $00
        .byte %01111100, %01000000, %01000000, %01111000, %01000000, %01000000, %01000000, 0
        .res 8, $00
