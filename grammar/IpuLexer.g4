// The `.ipu` lexer. Its keyword rules are the single source of the language's
// keyword list: the REPL completion, the editor grammars and docs read it back
// from the generated vocabulary (see interpreter/syntax/keywords.h).
lexer grammar IpuLexer;

// ---- keywords (declaration kinds) ----
IMPORT    : 'import';
AS        : 'as';
LET       : 'let';
CHIP      : 'chip';
MACHINE   : 'machine';
POD       : 'pod';
LAYER     : 'layer';
MODEL     : 'model';
MAPPING   : 'mapping';
PRECISION : 'precision';
OPTIMIZER : 'optimizer';
DATASET   : 'dataset';
TRAINING  : 'training';
HOOK      : 'hook';
SWEEP     : 'sweep';
RUN       : 'run';

// ---- keywords (structure and expressions) ----
WITH      : 'with';
FOR       : 'for';
ON        : 'on';
OFF       : 'off';
REPEAT    : 'repeat';
IPU       : 'ipu';
STAGE     : 'stage';
PHASE     : 'phase';
FROM      : 'from';
WARMUP    : 'warmup';
THEN      : 'then';
TO        : 'to';
PER       : 'per';
IF        : 'if';
ELSE      : 'else';
LUA       : 'lua';
FILE      : 'file';
TRUE      : 'true';
FALSE     : 'false';
AND       : 'and';
OR        : 'or';
NOT       : 'not';

// ---- punctuation ----
LBRACE    : '{';
RBRACE    : '}';
LPAREN    : '(';
RPAREN    : ')';
LBRACK    : '[';
RBRACK    : ']';
DOTDOT    : '..';
DOT       : '.';
COMMA     : ',';
SEMI      : ';';
COLON     : ':';
EQEQ      : '==';
NEQ       : '!=';
LE        : '<=';
GE        : '>=';
LT        : '<';
GT        : '>';
ASSIGN    : '=';
PLUS      : '+';
MINUS     : '-';
STAR      : '*';
SLASH     : '/';
CARET     : '^';
PERCENT   : '%';

// ---- literals ----
// A float needs digits on both sides of the dot so that `0..3` lexes as a range.
FLOAT     : DIGITS '.' DIGITS EXPONENT? | DIGITS EXPONENT ;
INT       : DIGITS ;
TRIPLE_STRING : '"""' .*? '"""' ;
STRING    : '"' ( ESCAPE | ~["\\\r\n] )* '"' ;
IDENT     : [a-zA-Z_] [a-zA-Z_0-9]* ;

// ---- trivia: comments stay on the hidden channel so the formatter can keep them ----
LINE_COMMENT  : '//' ~[\r\n]* -> channel(HIDDEN) ;
BLOCK_COMMENT : '/*' .*? '*/' -> channel(HIDDEN) ;
WS            : [ \t\r\n\f]+ -> skip ;

fragment DIGITS   : [0-9] ( '_'? [0-9] )* ;
fragment EXPONENT : [eE] [+-]? [0-9]+ ;
// Any escape lexes; the transformer reports the ones that mean nothing, so a
// typo like "\q" is "invalid escape", not "unterminated string".
fragment ESCAPE   : '\\' ~[\r\n] ;
