// The `.ipu` parser. Small and regular on purpose: every declaration has the
// same shape (`kind name params? for? on? (= value | { members })`); what a
// kind may contain is checked against data-driven schemas in interpreter/check,
// not in the grammar, so errors there can say "unknown field, did you mean".
parser grammar IpuParser;

options { tokenVocab = IpuLexer; }

program     : item* EOF ;
valueOnly   : value EOF ;   // an expression on its own (the REPL's input)

item        : importDecl
            | letDecl
            | declaration
            | runDecl
            ;

importDecl  : IMPORT path=STRING (AS alias=IDENT)? ;
letDecl     : LET name=IDENT ASSIGN value ;
runDecl     : RUN name=IDENT ;

declaration : declKind name=IDENT paramList? (FOR forExpr=expr)? (ON onExpr=expr)?
              ( ASSIGN value | block ) ;

declKind    : CHIP | MACHINE | POD | LAYER | MODEL | MAPPING | PRECISION
            | OPTIMIZER | DATASET | TRAINING | HOOK | SWEEP ;

paramList   : LPAREN ( param ( COMMA param )* COMMA? )? RPAREN ;
param       : name=IDENT ( COLON type=fieldName )? ( ASSIGN dflt=expr )? ;

block       : LBRACE ( member ( COMMA | SEMI )? )* RBRACE ;

member      : fieldPath COLON value                                        # fieldMember
            | fieldName block                                              # blockMember
            | LET name=IDENT ASSIGN value                                  # letMember
            | LAYER name=IDENT ASSIGN expr                                 # layerMember
            | REPEAT count=expr AS name=IDENT
              ( LBRACK index=IDENT RBRACK )? ASSIGN body=expr             # repeatMember
            | stageKw=( IPU | STAGE ) INT COLON expr ( COMMA expr )*       # stageMember
            | PHASE name=IDENT ( FROM from=IDENT )? block                  # phaseMember
            ;

// Field names may be keywords (`optimizer: lamb`, `model: x`): a name followed by
// `:` can never start anything else, so this costs no ambiguity.
fieldName   : IDENT | IMPORT | AS | LET | CHIP | MACHINE | POD | LAYER | MODEL
            | MAPPING | PRECISION | OPTIMIZER | DATASET | TRAINING | HOOK | SWEEP | RUN
            | WITH | FOR | ON | OFF | REPEAT | IPU | STAGE | PHASE | FROM
            | WARMUP | THEN | TO | PER | IF | ELSE | LUA | FILE | TRUE | FALSE
            | AND | OR | NOT
            ;

// A dotted field name (`phase.short.micro_batch: [4, 8]`) names a value inside
// the training a sweep varies; only a sweep's `parameters { ... }` accepts one
// (the checker says so elsewhere).
fieldPath   : fieldName ( DOT fieldName )* ;

// A value is an expression, optionally followed by a learning-rate schedule:
//   0.006 warmup 2000 steps then linear to 0
//   0.1 per 256 warmup 5 epochs then cosine to 0
value       : expr ( PER per=expr )? ( WARMUP warmup=expr )? ( THEN decay )? ;
decay       : kind=IDENT ( LPAREN args? RPAREN )? ( TO end=expr )? ;

expr        : primary                                                      # primaryExpr
            | expr DOT fieldName                                           # memberExpr
            | expr LBRACK expr RBRACK                                      # indexExpr
            | expr LPAREN args? RPAREN                                     # callExpr
            | expr WITH block                                              # withExpr
            | <assoc=right> expr CARET expr                                # powExpr
            | MINUS expr                                                   # negExpr
            | expr op=( STAR | SLASH ) expr                                # mulExpr
            | expr op=( PLUS | MINUS ) expr                                # addExpr
            | expr DOTDOT expr                                             # rangeExpr
            | expr op=( EQEQ | NEQ | LT | LE | GT | GE ) expr               # cmpExpr
            | NOT expr                                                     # notExpr
            | expr AND expr                                                # andExpr
            | expr OR expr                                                 # orExpr
            | IF cond=expr THEN then=expr ELSE otherwise=expr              # ifExpr
            ;

args        : arg ( COMMA arg )* COMMA? ;
arg         : ( fieldName COLON )? expr ;

primary     : number=( INT | FLOAT ) unit?                                 # numberLit
            | STRING                                                       # stringLit
            | TRIPLE_STRING                                                # tripleStringLit
            | ( TRUE | ON )                                                # trueLit
            | ( FALSE | OFF )                                              # falseLit
            | IDENT                                                        # nameRef
            | LBRACK ( expr ( COMMA expr )* COMMA? )? RBRACK              # listLit
            | LPAREN expr RPAREN                                           # parenExpr
            | block                                                        # recordLit
            | LUA ( STRING | TRIPLE_STRING | FILE STRING | IDENT )         # luaLit
            ;

// A unit follows its number: `900 MB`, `1.33 GHz`, `64 GB/s`, `15%`, `2000 steps`.
// Which identifiers are units is decided by the checker, so a misspelt unit gets
// a "did you mean" rather than a parse error. Compound units are rates, per
// second: `/` continues a unit only before `s`, so `900 MB / n` and
// `1 GB / max(2, n)` are divisions.
unit        : PERCENT
            | IDENT ( {_input->LA(1) == SLASH && _input->LT(2)->getText() == "s"}? SLASH IDENT )?
            ;
